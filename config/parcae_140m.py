# Parcae-140M (paper Tables 18, 19, 21): 144,323,136 parameters, 2/2/2 layers in P/R/C,
# mu_rec 8, backprop depth 4, per-sequence truncated-Poisson depth. Matched baseline: config/gpt_140m.py.
# parcae_370m.py, parcae_770m.py and parcae_1_3b.py are this file with their widths, depths and budgets.
#   python train.py config/parcae_140m.py
#   torchrun --standalone --nproc_per_node=8 train.py config/parcae_140m.py
#   python -m tools.eval --out_dir=out-parcae_140m --sweep=num_recur=1..24   (test-time depth, L(T) fit)
base = 'recipe/parcae.py'
model = 'parcae'
out_dir = 'out-parcae_140m'
n_embd = 768
n_head = 6
n_prelude = 2
n_recur_layers = 2
n_coda = 2
block = 'prenorm'
injection = 'diagonal'
prelude_norm = True
readout = True
mean_recurrence = 8
mean_backprop_depth = 4
depth_sampling = 'per_sequence'
micro_batch_size = 32       # per forward on a GPU: the dry run under torchrun (WORLD_SIZE=8) says it fits 80 GB
