# tools.results fon: Mamba2 (baselines.Mamba2, chunked SSD) matched to config/cpu_fon.py in parameters and
# FLOPs (880,608 vs 891,908; 6.92M vs 6.91M FLOPs per token at 128): the FON paper's headline control (Table 2).
base = '../../recipe/shakespeare_char.py'
out_dir = 'out-results/fon/mamba2'
eval_interval = 100
model = 'mamba2'
vocab_size = 66
block_size = 128
n_layer = 8
n_embd = 128
expand = 2
d_state = 32
tie_weights = True         # tied as FON and the GPTs are
learning_rate = 2e-3
min_lr = 2e-4
max_iters = 1500
lr_decay_iters = 1500
