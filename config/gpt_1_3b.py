# Transformer-1.3B baseline of the Parcae paper (Tables 18, 19, 21): 1,333,868,544 parameters,
# 24 nanochat-style layers, 104B tokens. The matched looped model: config/parcae_1_3b.py.
base = 'gpt_140m.py'
out_dir = 'out-gpt_1_3b'
n_embd = 1536
n_head = 12
n_layer = 24
batch_size = 16
gradient_accumulation_steps = 16
max_iters = 198364        # 104B / (256 * 2048)
learning_rate = 6e-3       # AdamW
micro_batch_size = 8       # per forward on a GPU: the dry run under torchrun (WORLD_SIZE=8) says it fits 80 GB
