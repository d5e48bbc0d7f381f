# Sec. A.3 / Fig. 5: single scale (w=32, T=12) with local linear attention (Taylor-2). Paper PPL 176
base = 'textnca_l1.py'
out_dir = 'out-textnca-l1-linear'
kernel = 'linear'
