# Transformer-770M baseline of the Parcae paper (Tables 18, 19, 21): 773,375,040 parameters,
# 18 nanochat-style layers. The matched looped model: config/parcae_770m.py.
#   python train.py config/gpt_770m.py
#   torchrun --standalone --nproc_per_node=8 train.py config/gpt_770m.py
model = 'gpt'
out_dir = 'out/gpt_770m'
# data: python prepare_data.py fineweb_edu --vocab 32768 --shards 1130   (~55M tokens a shard;
# GPT-2's BPE cut to its first 32768 ranks, the paper's vocabulary size; needs pip install pyarrow)
dataset = 'fineweb_edu_gpt2_32768'
vocab_size = 32768
block_size = 2048
n_embd = 1280
n_head = 10
head_dim = 128
n_layer = 18
n_kv_head = 10
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
# 61.6B tokens: 256 sequences x 2048 tokens per step (Table 21)
batch_size = 32
gradient_accumulation_steps = 8   # per step over all GPUs (train.py divides by the world size)
max_iters = 117493        # 61.6B / (256 * 2048)
eval_interval = 512
eval_iters = 16
log_interval = 10
# Table 21 recipe (simplified nanochat): Muon for attention/MLP matrices, AdamW for the rest
optimizer = 'muon'
learning_rate = 6e-3       # AdamW
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
