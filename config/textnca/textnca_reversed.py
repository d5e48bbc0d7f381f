# Table 2: reversed schedule [128,32,8]. Paper 30.8M, PPL 131.1
base = '../textnca_hier.py'
out_dir = 'out-textnca_reversed'
windows = (128, 32, 8)
