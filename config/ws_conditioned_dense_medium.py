# Causal latent workspace paper, 101.71M budget. Anchored conditioned-dense (row 5): anchored loop + zero-initialised per-round
# scale/shift before the block and an element-wise readout of the earlier exits.
# 101,708,936 parameters (-778).
model = 'workspace'
variant = 'conditioned_dense'
n_embd = 2560
n_head = 20
d_ff = 10376
n_rounds = 4
# Table 2, larger recipe: 20k updates of 4 x 2 (accumulation) sequences x 512 scored targets
# (81.92M), bf16 autocast, lr linear warmup to 1e-4 over 2000 updates then constant.
# The paper names only AdamW: PyTorch AdamW defaults for betas/weight decay are this repo's choice.
dataset = 'wikitext103_byte'     # python prepare_data.py wikitext103 --tokenizer byte (also enwik8, tinystories)
vocab_size = 257
block_size = 512
sampler = 'blocks'               # non-overlapping 513-symbol blocks, shuffled once, without replacement
batch_size = 4
gradient_accumulation_steps = 2
max_iters = 20000
learning_rate = 1e-4
warmup_iters = 2000
schedule = 'constant'
weight_decay = 0.01
beta1 = 0.9
beta2 = 0.999
grad_clip = 1.0
dtype = 'bfloat16'
eval_interval = 2000
eval_iters = 50
seed = 11                        # the paper's seeds: 11, 23, 37
out_dir = 'out/ws_conditioned_dense_medium'
