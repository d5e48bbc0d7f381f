# Table 6: no step embedding. Paper PPL 82.7
base = '../textnca_hier.py'
out_dir = 'out-textnca_nostep'
step_embed = 'none'
