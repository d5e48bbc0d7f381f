# Transformer-1.3B baseline of the Parcae paper (Tables 18, 19, 21): 1,333,868,544 parameters,
# 24 nanochat-style layers. The matched looped model: config/parcae_1_3b.py.
#   python train.py config/gpt_1_3b.py
#   torchrun --standalone --nproc_per_node=8 train.py config/gpt_1_3b.py
model = 'gpt'
out_dir = 'out/gpt_1_3b'
# data: python prepare_data.py fineweb_edu --vocab 32768 --shards 1822   (~55M tokens a shard;
# GPT-2's BPE cut to its first 32768 ranks, the paper's vocabulary size; needs pip install pyarrow)
dataset = 'fineweb_edu_gpt2_32768'
vocab_size = 32768
block_size = 2048
n_embd = 1536
n_head = 12
head_dim = 128
n_layer = 24
n_kv_head = 12
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
# 104B tokens: 256 sequences x 2048 tokens per step (Table 21)
batch_size = 16
gradient_accumulation_steps = 16   # per step over all GPUs (train.py divides by the world size)
max_iters = 198364        # 104B / (256 * 2048)
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
