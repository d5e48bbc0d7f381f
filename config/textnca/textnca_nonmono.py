# Table 2: non-monotone schedule [8,128,32]. Paper 30.8M, PPL 77.0
base = '../textnca_hier.py'
out_dir = 'out-textnca_nonmono'
windows = (8, 128, 32)
