# Sec. A.3 / Fig. 5: single scale (w=32, T=12) with the GLA kernel. Paper 21.4M, PPL 129
base = '../textnca_hier.py'
out_dir = 'out-textnca_l1_gla'
windows = (32,)
Ts = 12
orchestration = 'single'
kernel = 'gla'
