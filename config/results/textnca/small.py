# tools/results.py textnca, the second size: config/results/textnca/textnca.py at half the width (d 48), trained
# for 4,500 iterations (3.5M tokens): 20-27 tokens per non-embedding parameter (the GPTs, TextNCA), the papers' regime.
base = 'textnca.py'
out_dir = 'out-results/textnca-small/textnca'
n_embd = 48
d_ff = 192
eval_interval = 500
max_iters = 4500
lr_decay_iters = 4500
