# Parcae-370M (paper Tables 18, 19, 21): 388,003,328 parameters, 4/4/4 layers in P/R/C, 29.6B tokens.
# Matched baseline: config/gpt_370m.py.
base = 'parcae_140m.py'
out_dir = 'out-parcae_370m'
n_embd = 1024
n_head = 8
n_prelude = 4
n_recur_layers = 4
n_coda = 4
batch_size = 16
gradient_accumulation_steps = 16
max_iters = 56458        # 29.6B / (256 * 2048)
micro_batch_size = 16       # per forward on a GPU: the dry run under torchrun (WORLD_SIZE=8) says it fits 80 GB
