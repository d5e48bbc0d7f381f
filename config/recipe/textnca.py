# The TextNCA paper's data and training recipe (section 4.1), shared by every model of its tables:
# textnca_*.py, tf_*.py, swin_tf_*.py, ut.py. Not a model: those configs name it as their base.
# AdamW 6e-4, betas (0.9, 0.95), wd 0.1, clip 1.0, cosine with 2000 warmup steps, bf16, seq 512,
# 65,536 tokens/step (32 x 4 x 512), 60k steps, seed 42 (App. G). The paper trains on a 500M-token
# SlimPajama subset with the Mistral 32K vocabulary and evaluates on WikiText-103: any dataset
# tokenised to 32000 ids fits (see README).
dataset = 'wikitext103_gpt2_32000'  # python prepare_data.py wikitext103 --vocab 32000
vocab_size = 32000
block_size = 512
batch_size = 32
gradient_accumulation_steps = 4
learning_rate = 6e-4
min_lr = 6e-5
beta1 = 0.9
beta2 = 0.95
weight_decay = 0.1
grad_clip = 1.0
schedule = 'cosine'
warmup_iters = 2000
max_iters = 60000
lr_decay_iters = 60000
dtype = 'bfloat16'
eval_interval = 2000
eval_iters = 100
log_interval = 50
seed = 42
