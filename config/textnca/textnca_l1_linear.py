# Sec. A.3 / Fig. 5: single scale (w=32, T=12) with local linear attention (Taylor-2). Paper PPL 176
base = '../textnca_hier.py'
out_dir = 'out-textnca_l1_linear'
windows = (32,)
Ts = 12
orchestration = 'single'
kernel = 'linear'
