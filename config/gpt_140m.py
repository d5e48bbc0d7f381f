# Transformer-140M baseline of the Parcae paper (Tables 18, 19, 21): 143,141,184 parameters,
# 6 nanochat-style layers. The matched looped model: config/parcae_140m.py.
# gpt_370m.py, gpt_770m.py and gpt_1_3b.py are this file with their widths, depths and budgets.
#   python train.py config/gpt_140m.py
#   torchrun --standalone --nproc_per_node=8 train.py config/gpt_140m.py
base = 'recipe/parcae.py'
model = 'gpt'
out_dir = 'out-gpt_140m'
n_embd = 768
n_head = 6
n_layer = 6
bias = False
pos = 'rope'
norm = 'rms'
fused_qkv = False          # separate q, k, v as nanochat: Muon orthogonalises each (Table 20)
dropout = 0.0
init = 'scaled_zero'       # Table 18: the baselines start from Parcae's own init
micro_batch_size = 32       # per forward on a GPU: the dry run under torchrun (WORLD_SIZE=8) says it fits 80 GB
