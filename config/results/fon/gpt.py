# tools.results fon: the 4-layer GPT of cpu_fon's recipe, d_ff 600 for 891,904 (FON paper Sec. 4.3's
# position controls; tools/results passes --pos: a learned table of 8 x 128 rows adds 131,072, RoPE, ALiBi).
base = '../../recipe/shakespeare_char.py'
out_dir = 'out-results/fon/gpt'
eval_interval = 100
model = 'gpt'
vocab_size = 66
block_size = 128
n_layer = 4
n_embd = 128
n_head = 4
d_ff = 600
learning_rate = 2e-3
min_lr = 2e-4
max_iters = 1500
lr_decay_iters = 1500
pos = 'rope'
