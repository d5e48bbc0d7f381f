# Parcae-1.3B (paper Tables 18, 19, 21): 1,338,591,744 parameters, 8/8/8 layers in P/R/C, 104B tokens.
# Matched baseline: config/gpt_1_3b.py.
base = 'parcae_140m.py'
out_dir = 'out-parcae_1_3b'
n_embd = 1536
n_head = 12
n_prelude = 8
n_recur_layers = 8
n_coda = 8
batch_size = 8
gradient_accumulation_steps = 32
max_iters = 198364        # 104B / (256 * 2048)
learning_rate = 6e-3       # AdamW
micro_batch_size = 4       # per forward on a GPU: the dry run under torchrun (WORLD_SIZE=8) says it fits 80 GB
