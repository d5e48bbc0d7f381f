# tools.results fon, the second size: config/results/fon/fon.py at half the width (d 64), trained for
# 3,000 iterations (4.6M tokens): 20 or more tokens per non-embedding parameter, the papers' regime.
base = '../../cpu_fon.py'
out_dir = 'out-results/fon/fon_small'
eval_interval = 500
n_embd = 64
max_iters = 3000
lr_decay_iters = 3000
