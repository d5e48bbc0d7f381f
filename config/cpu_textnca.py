# Hier-TextNCA on tiny Shakespeare (characters) on a laptop CPU in a few minutes: the flagship's
# shape (3 stages, narrow-to-wide windows, GRU gate, learned step embeddings) at width 96.
# Same recipe as a GPT here: val 2.07 after 1000 iterations vs 2.10 for a 6-layer GPT of its size
# (README, Results: python -m tools.results textnca).
# First: python prepare_data.py shakespeare_char   (offline: add --input path/to/input.txt)
base = 'recipe/shakespeare_char.py'
out_dir = 'out-cpu_textnca'
model = 'textnca'
n_embd = 96
n_head = 4
d_ff = 384
windows = (4, 16, 64)
Ts = 2
learning_rate = 2e-3
max_iters = 1000
lr_decay_iters = 1000
min_lr = 2e-4
