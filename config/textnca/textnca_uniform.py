# Table 2: uniform schedule [32,32,32]. Paper 30.8M, PPL 119.7
base = '../textnca_hier.py'
out_dir = 'out-textnca_uniform'
windows = (32, 32, 32)
