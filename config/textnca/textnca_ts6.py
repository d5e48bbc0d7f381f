# Table 7: Ts=6 (18 NCA steps). Paper 30.86M, PPL 73.9
base = '../textnca_hier.py'
out_dir = 'out-textnca_ts6'
Ts = 6
