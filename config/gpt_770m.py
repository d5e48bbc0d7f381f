# Transformer-770M baseline of the Parcae paper (Tables 18, 19, 21): 773,375,040 parameters,
# 18 nanochat-style layers, 61.6B tokens. The matched looped model: config/parcae_770m.py.
base = 'gpt_140m.py'
out_dir = 'out-gpt_770m'
n_embd = 1280
n_head = 10
n_layer = 18
max_iters = 117493        # 61.6B / (256 * 2048)
learning_rate = 6e-3       # AdamW
micro_batch_size = 16       # per forward on a GPU: the dry run under torchrun (WORLD_SIZE=8) says it fits 80 GB
