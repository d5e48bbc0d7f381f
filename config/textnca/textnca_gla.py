# Table 3: GLA perception kernel in the hierarchical body. Paper 30.9M, PPL 72.0
base = '../textnca_hier.py'
out_dir = 'out-textnca_gla'
kernel = 'gla'
