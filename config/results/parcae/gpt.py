# tools.results parcae: the parameter-matched GPT (Parcae paper Table 18's baselines: scaled-zero init, RoPE,
# RMS norm, ReLU^2, value embeddings), 6 layers with d_ff 534 for 1,248,768, on parcae.py's recipe (Adam, Table 2;
# followed by muon.py: Table 21's).
base = '../../recipe/shakespeare_char.py'
out_dir = 'out-results/parcae/gpt'
eval_interval = 100
max_iters = 600
update_clipping = True
adam_atan2 = True
optimizer = 'adamw'
beta1 = 0.9
weight_decay = 0.0
schedule = 'trapezoid'
warmup_iters = 50
cooldown_frac = 0.5
min_lr = 0.0
model = 'gpt'
n_layer = 6
n_embd = 128
n_head = 4
head_dim = 32
d_ff = 534
pos = 'rope'
rope_base = 50000.0
norm = 'rms'
mlp = 'relu2'
qk_norm = True
value_embeds = True
bias = False
fused_qkv = False
init = 'scaled_zero'
