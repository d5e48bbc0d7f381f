# Sec. A.4: overwrite gate, h = u.
base = '../textnca_hier.py'
out_dir = 'out-textnca_overwrite'
gate = 'overwrite'
