# RDM-100M, the recurrent-depth baseline of Geiping et al. as trained in the Parcae paper (Table 17,
# Table 3): 114,242,560 parameters. Parcae on the same setup: config/parcae/rdm_parcae_100m.py.
# The paper trains on the Huginn data with a 65536-token tokenizer; here FineWeb-Edu with GPT-2's BPE
# (50257 ids in the 65536-row embedding, so the parameter count stays the paper's):
#   python prepare_data.py fineweb_edu --shards 200   (needs pip install pyarrow)
# The token budget of Table 3 is not in the paper's text: 10B tokens (19,074 steps of 256 x 2048).
#   python train.py config/parcae/rdm_100m.py
# rdm_350m.py and rdm_parcae_*.py are this file with only what they change.
model = 'parcae'
out_dir = 'out-rdm_100m'
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
injection = 'linear'      # RDM: h <- W [h; e], W in R^{d x 2d}, unconstrained (Table 1: unstable)
block = 'sandwich'        # Geiping et al.: norm before and after each sublayer
prelude_norm = False
readout = False
init = 'scaled'           # Table 17: Scaled (output projections at std / sqrt(2 D)), not Table 18's scaled-zero
mean_recurrence = 16
mean_backprop_depth = 8
depth_sampling = 'per_batch'   # prior work: one depth per micro-batch (sec. 2.1)
batch_size = 16
gradient_accumulation_steps = 16
max_iters = 19074
eval_interval = 512
eval_iters = 16
log_interval = 10
# Appendix Q.1: AdamW (0.9, 0.95), constant LR with 4096-step warmup and cooldown, clip 1
# (the best RDM learning rate of the sweep, used unchanged for Parcae). Q.1 also prints 4e-3/2e-3,
# outside its own sweep [2e-4, 1e-3], where Table 2's RDM diverges: read as a typo.
optimizer = 'adamw'
update_clipping = True     # Q.1: Adam with update clipping (Wortsman et al.) and no epsilon (atan2)
adam_atan2 = True
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
