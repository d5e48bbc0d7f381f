# Table 8 / Sec. A.5 TextNCA-L1: single layer, w=32, T=12. Paper 21.4M, single-scale softmax PPL 140
base = '../textnca_hier.py'
out_dir = 'out-textnca_l1'
windows = (32,)
Ts = 12
orchestration = 'single'
