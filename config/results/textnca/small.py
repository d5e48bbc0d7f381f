# tools.results textnca, the second size: config/results/textnca/textnca.py (block 128, windows (2, 8, 32),
# Ts 4) at half the width (d 48), trained for 4,500 iterations (3.5M tokens): 20-27 tokens per non-embedding
# parameter (the GPTs, TextNCA), the papers' regime.
base = '../../cpu_textnca.py'
out_dir = 'out-results/textnca/small'
block_size = 128
batch_size = 6
windows = (2, 8, 32)
Ts = 4
n_embd = 48
d_ff = 192
eval_interval = 500
max_iters = 4500
lr_decay_iters = 4500
