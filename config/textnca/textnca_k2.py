# Table 2: K=2 [16,128] x Ts=6 (12 NCA steps). Paper 26.1M, PPL 75.8
base = '../textnca_hier.py'
out_dir = 'out-textnca_k2'
windows = (16, 128)
Ts = 6
