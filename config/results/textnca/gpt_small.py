# tools.results textnca, the second size: config/results/textnca/gpt.py at TextNCA's small width (d 48),
# trained as config/results/textnca/small.py.
base = 'gpt.py'
out_dir = 'out-results/textnca/gpt_small'
n_embd = 48
d_ff = 192
eval_interval = 500
max_iters = 4500
lr_decay_iters = 4500
