# Transformer-140M baseline of the Parcae paper (Tables 18, 19, 21): 143,141,184 parameters,
# 6 nanochat-style layers. The matched looped model: config/parcae_140m.py.
#   python train.py config/gpt_140m.py
#   torchrun --standalone --nproc_per_node=8 train.py config/gpt_140m.py
model = 'gpt'
out_dir = 'out/gpt_140m'
# data: python prepare_data.py fineweb_edu --vocab 32768 --shards 210   (~55M tokens a shard;
# GPT-2's BPE cut to its first 32768 ranks, the paper's vocabulary size; needs pip install pyarrow)
dataset = 'fineweb_edu_gpt2_32768'
vocab_size = 32768
block_size = 2048
n_embd = 768
n_head = 6
head_dim = 128
n_layer = 6
n_kv_head = 6
bias = False
pos = 'rope'
rope_base = 50000.0
norm = 'rms'
mlp = 'relu2'
qk_norm = True
fused_qkv = False          # separate q, k, v as nanochat: Muon orthogonalises each (Table 20)
value_embeds = True
tie_weights = True
dropout = 0.0
# 11.2B tokens: 256 sequences x 2048 tokens per step (Table 21)
batch_size = 32
gradient_accumulation_steps = 8   # per step over all GPUs (train.py divides by the world size)
max_iters = 21362        # 11.2B / (256 * 2048)
eval_interval = 512
eval_iters = 16
log_interval = 10
# Table 21 recipe (simplified nanochat): Muon for attention/MLP matrices, AdamW for the rest
optimizer = 'muon'
learning_rate = 8e-3       # AdamW
muon_lr = 8e-3
beta1 = 0.8
beta2 = 0.95
eps = 1e-10
weight_decay = 0.0
muon_momentum = 0.95
muon_weight_decay = 0.2
muon_wd_decay = True      # linearly to 0 over max_iters
schedule = 'trapezoid'    # fixed LR, no warmup, linear cooldown over the last 50%
warmup_iters = 0
cooldown_frac = 0.5
min_lr = 0.0
grad_clip = 1.0
dtype = 'bfloat16'
