# Sec. A.5 MultiLayer TextNCA: 3 sub-layers x T=4, same window (32 chosen).
base = '../textnca_hier.py'
out_dir = 'out-textnca_multi'
windows = (32, 32, 32)
orchestration = 'multi'
