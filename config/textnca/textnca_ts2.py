# Table 7: Ts=2 (6 NCA steps). Paper 30.83M, PPL 80.3
base = '../textnca_hier.py'
out_dir = 'out-textnca_ts2'
Ts = 2
