# tools.results fon, the second size: config/results/fon/gpt.py at FON's small width (d 64), trained as
# config/results/fon/fon_small.py.
base = 'gpt.py'
out_dir = 'out-results/fon/gpt_small'
eval_interval = 500
n_embd = 64
d_ff = 300
max_iters = 3000
lr_decay_iters = 3000
