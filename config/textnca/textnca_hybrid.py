# App. B Hier-Hybrid: the flagship plus one causal global-attention block and FFN before ln_f. Paper 34.0M, PPL 61.0
base = '../textnca_hier.py'
out_dir = 'out-textnca_hybrid'
readout_block = True
