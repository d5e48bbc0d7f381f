# CPU demo of the causal latent workspace (minutes on a laptop): a 0.34M workspace model on
# tiny Shakespeare bytes, the paper's protocol (257 symbols, non-overlapping blocks sampled
# without replacement) at a shorter block. Data, offline:
#   python prepare_data.py shakespeare --tokenizer byte --input path/to/tinyshakespeare.txt
#   (or without --input where there is network)
#   python train.py config/cpu_workspace.py
#   python -m tools.eval --out_dir=out-cpu_workspace --stream=True
# Swap the row: --variant=anchored (or shared_loop, adaptive_exit, conditioned_dense).
model = 'workspace'
variant = 'workspace'
n_embd = 128
n_head = 4
d_ff = 384
slot_dim = 32
n_slots = 4
n_rounds = 4
dataset = 'shakespeare_byte'
vocab_size = 257
block_size = 256
sampler = 'blocks'
batch_size = 8
max_iters = 1000
learning_rate = 2e-3
warmup_iters = 100
schedule = 'cosine'
min_lr = 2e-4
weight_decay = 0.01
beta2 = 0.99
eval_interval = 250
eval_iters = 20
log_interval = 25
dtype = 'float32'
device = 'cpu'
compile = False
out_dir = 'out-cpu_workspace'
