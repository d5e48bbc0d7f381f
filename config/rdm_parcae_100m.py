# Parcae-100M in the RDM setup (paper Table 17, Table 3): 113,189,888 (Table 17 prints 114,242,560, the RDM-100M number) parameters.
# Its baseline: config/rdm_100m.py (same shapes, data and recipe).
# The paper trains on the Huginn data with a 65536-token tokenizer; here FineWeb-Edu with GPT-2's BPE
# (50257 ids in the 65536-row embedding, so the parameter count stays the paper's):
#   python prepare_data.py fineweb_edu --shards 200   (needs pip install pyarrow)
# The token budget of Table 3 is not in the paper's text: 10B tokens (19,074 steps of 256 x 2048).
#   python train.py config/rdm_parcae_100m.py
model = 'parcae'
out_dir = 'out/rdm_parcae_100m'
dataset = 'fineweb_edu'
vocab_size = 65536
block_size = 2048
n_embd = 1024
n_head = 8
head_dim = 128
d_ff = 3520
mlp = 'swiglu'
qk_norm = False
value_embeds = False
rope_base = 50000.0
tie_weights = True
n_prelude = 1
n_recur_layers = 1
n_coda = 1
injection = 'diagonal'    # Parcae: A_bar = exp(-Delta A), B_bar = Delta B
block = 'prenorm'         # no residual normalisation needed once rho(A_bar) < 1
prelude_norm = False      # Table 17's count has no prelude norm and no C
readout = False
mean_recurrence = 16
mean_backprop_depth = 8
depth_sampling = 'per_sequence'
state_init = 'like-init'
batch_size = 16
gradient_accumulation_steps = 16
max_iters = 19074
eval_interval = 512
eval_iters = 16
log_interval = 10
# Appendix Q.1: AdamW (0.9, 0.95), constant LR with 4096-step warmup and cooldown, clip 1
# (the best RDM learning rate of the sweep, used unchanged for Parcae)
optimizer = 'adamw'
learning_rate = 4e-4
beta1 = 0.9
beta2 = 0.95
weight_decay = 0.1         # not stated in the paper
schedule = 'trapezoid'
warmup_iters = 4096
cooldown_frac = 0.2147   # 4096 steps
min_lr = 0.0
grad_clip = 1.0
dtype = 'bfloat16'
