# Tables 3, 5: residual gate h + u. Paper 26.1M, PPL 76.6
base = '../textnca_hier.py'
out_dir = 'out-textnca_residual'
gate = 'residual'
