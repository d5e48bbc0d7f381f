# The Parcae paper's nanochat setup (Tables 18, 20, 21), shared by parcae_*.py and gpt_*.py: the data,
# the block choices of both families and the training recipe, at the 140M token budget.
# Not a model: those configs name it as their base.
# data: python prepare_data.py fineweb_edu --vocab 32768 --shards 210   (~55M tokens a shard;
# GPT-2's BPE cut to its first 32768 ranks, the paper's vocabulary size; needs pip install pyarrow).
# The larger budgets need --shards 550 (370M), 1130 (770M), 1822 (1.3B).
dataset = 'fineweb_edu_gpt2_32768'
vocab_size = 32768
block_size = 2048
head_dim = 128
mlp = 'relu2'
qk_norm = True
value_embeds = True
rope_base = 50000.0
tie_weights = True
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
muon_variant = 'parcae'   # Section Q.2: Polar Express, variance reduction, cautious weight decay
muon_momentum_warmup = 300   # momentum 0.85 -> 0.95 over 300 steps (authors' code)
muon_weight_decay = 0.2
muon_wd_decay = True      # linearly to 0 over max_iters
schedule = 'trapezoid'    # fixed LR, no warmup, linear cooldown over the last 50%
warmup_iters = 0
cooldown_frac = 0.5
min_lr = 0.0
grad_clip = 1.0
dtype = 'bfloat16'
