# tools.results parcae, the second size: parcae.py at 3/8 of the width, the head count kept (d 48, 4 heads of
# 12; P/R/C 2/2/2, mean depth 4, backprop through 2): 184,128 parameters, 171,648 non-embedding. Followed by
# muon_small.py, Table 21's recipe trained for 4,500 iterations (3.5M tokens): 20 tokens per non-embedding
# parameter (the first size: 0.38), the papers' regime.
base = '../../cpu_parcae.py'   # and parcae.py's lines:
eval_interval = 100
max_iters = 600
update_clipping = True
adam_atan2 = True
out_dir = 'out-results/parcae/parcae_small'
n_embd = 48
n_head = 4
head_dim = 12
