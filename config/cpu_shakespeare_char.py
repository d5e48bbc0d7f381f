# nanoGPT's CPU recipe for tiny Shakespeare, characters (its README: val loss about 1.88 after
# 2000 iterations). First: python prepare_data.py shakespeare_char
base = 'recipe/shakespeare_char.py'
out_dir = 'out-cpu_shakespeare_char'
model = 'gpt'
n_layer = 4
n_head = 4
n_embd = 128
dropout = 0.0
bias = False
learning_rate = 1e-3
max_iters = 2000
lr_decay_iters = 2000
min_lr = 1e-4
