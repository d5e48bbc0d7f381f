# tools.results textnca: the paper's Transformer-6L (config/textnca/tf_6l.py: learned positions, LayerNorm,
# GELU, biases, tied head) at the TextNCA run's width (d 96) and recipe (config/results/textnca/textnca.py).
# the lab passes --windows for SWin-TF-Staged and SWin-TF-6L, and --n_embd=84 for the parameter-matched row.
base = '../../recipe/shakespeare_char.py'
out_dir = 'out-results/textnca/gpt'
eval_interval = 100
block_size = 128
batch_size = 6
model = 'gpt'
n_layer = 6
n_embd = 96
n_head = 4
d_ff = 384
bias = True
pos = 'learned'
norm = 'layer'
mlp = 'gelu'
tie_weights = True
learning_rate = 2e-3
min_lr = 2e-4
max_iters = 1000
lr_decay_iters = 1000
