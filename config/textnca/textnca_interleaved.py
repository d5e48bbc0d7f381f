# Table 2: interleaved [8,32,128] x T=4, one shared cell cycling the windows each step. Paper 27.7M, PPL 94.4
base = '../textnca_hier.py'
out_dir = 'out-textnca_interleaved'
orchestration = 'interleaved'
