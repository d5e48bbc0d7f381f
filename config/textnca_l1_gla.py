# Sec. A.3 / Fig. 5: single scale (w=32, T=12) with the GLA kernel. Paper 21.4M, PPL 129
base = 'textnca_l1.py'
out_dir = 'out-textnca-l1-gla'
kernel = 'gla'
