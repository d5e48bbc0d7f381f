# Parcae-770M (paper Tables 18, 19, 21): 776,655,680 parameters, 6/6/6 layers in P/R/C, 61.6B tokens.
# Matched baseline: config/gpt_770m.py.
base = 'parcae_140m.py'
out_dir = 'out-parcae_770m'
n_embd = 1280
n_head = 10
n_prelude = 6
n_recur_layers = 6
n_coda = 6
batch_size = 8
gradient_accumulation_steps = 32
max_iters = 117493        # 61.6B / (256 * 2048)
learning_rate = 6e-3       # AdamW
micro_batch_size = 8       # per forward on a GPU: the dry run under torchrun (WORLD_SIZE=8) says it fits 80 GB
