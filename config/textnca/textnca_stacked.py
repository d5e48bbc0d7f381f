# Sec. A.5 Stacked NCA 6C x T2: 6 distinct cells (w=32 chosen), 2 iterations each.
base = '../textnca_hier.py'
out_dir = 'out-textnca_stacked'
windows = (32, 32, 32, 32, 32, 32)
Ts = 2
orchestration = 'stacked'
