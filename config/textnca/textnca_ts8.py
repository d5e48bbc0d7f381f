# Table 7: Ts=8 (24 NCA steps). Paper 30.87M, PPL 117.9
base = '../textnca_hier.py'
out_dir = 'out-textnca_ts8'
Ts = 8
