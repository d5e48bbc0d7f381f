# tools.results fon, the second size: config/results/fon/mamba2.py at FON's small width (d 64), trained as
# config/results/fon/fon_small.py.
base = 'mamba2.py'
out_dir = 'out-results/fon/mamba2_small'
eval_interval = 500
n_embd = 64
d_state = 16               # halved with the width: 222,064 non-embedding parameters against FON's 224,772
max_iters = 3000
lr_decay_iters = 3000
