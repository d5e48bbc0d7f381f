# nanoGPT's CPU recipe for tiny Shakespeare, characters (its README: val loss about 1.88 after
# 2000 iterations). First: python prepare_data.py shakespeare_char
out_dir = 'out-shakespeare-char'
dataset = 'shakespeare_char'
eval_interval = 250
eval_iters = 20
log_interval = 10
always_save_checkpoint = False

model = 'gpt'
n_layer = 4
n_head = 4
n_embd = 128
dropout = 0.0
bias = False
block_size = 64
batch_size = 12

learning_rate = 1e-3
max_iters = 2000
lr_decay_iters = 2000
min_lr = 1e-4
beta2 = 0.99
warmup_iters = 100

device = 'cpu'
compile = False
