# Transformer-370M baseline of the Parcae paper (Tables 18, 19, 21): 385,903,104 parameters,
# 12 nanochat-style layers, 29.6B tokens. The matched looped model: config/parcae_370m.py.
base = 'gpt_140m.py'
out_dir = 'out-gpt_370m'
n_embd = 1024
n_head = 8
n_layer = 12
max_iters = 56458        # 29.6B / (256 * 2048)
micro_batch_size = 16       # per forward on a GPU: the dry run under torchrun (WORLD_SIZE=8) says it fits 80 GB
