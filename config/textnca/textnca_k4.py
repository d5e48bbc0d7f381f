# Table 2: K=4 [4,16,64,128] x Ts=3 (12 NCA steps). Paper 35.6M, PPL 71.8
base = '../textnca_hier.py'
out_dir = 'out-textnca_k4'
windows = (4, 16, 64, 128)
Ts = 3
