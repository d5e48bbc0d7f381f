# The FON paper's data and pretraining recipe (Sec. 4.1 / Methods), shared by fon_*.py and fon/*.py: FON and its
# Transformer and Mamba2 baselines. Not a model: those configs name it as their base.
# AdamW 3e-4, betas (0.9, 0.95), wd 0.1, warmup 300, cosine over 20k steps, clip 1.0,
# batch 16 x seq 256, fp32, synthetic skills mixed in at 0.35.
dataset = 'wikitext103'            # python prepare_data.py wikitext103
synth_dataset = 'synthetic_gpt2'   # python prepare_data.py synthetic --tokenizer gpt2
p_synth = 0.35
vocab_size = 50304
block_size = 256
batch_size = 16
gradient_accumulation_steps = 1
learning_rate = 3e-4
beta1 = 0.9
beta2 = 0.95
weight_decay = 0.1
grad_clip = 1.0
schedule = 'cosine'
warmup_iters = 300
max_iters = 20000
lr_decay_iters = 20000
min_lr = 3e-5                      # not in the paper: nanoGPT's lr / 10
dtype = 'float32'                  # the paper trains in fp32; bf16 (dtype='auto') runs on tensor cores at several times the speed
tf32 = False                       # true fp32 matmuls, as the paper's (CUDA cores); tf32=True: tensor cores, half of bf16's H100 peak
eval_interval = 1000
eval_iters = 50
log_interval = 50
