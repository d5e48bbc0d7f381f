# The causal latent workspace paper's data and small recipe (Table 2), shared by workspace_small.py
# and workspace/ws_*_small.py. Not a model: those configs name it as their base.
# Table 2, small recipe: 20k updates of 8 sequences x 512 scored targets (81.92M), fp32.
# The paper names only AdamW; its Table 2 values were lost: lr 1e-3, warmup 2000 then constant,
# PyTorch AdamW defaults for betas/weight decay are this repo's choices.
dataset = 'wikitext103_byte'     # python prepare_data.py wikitext103 --tokenizer byte (also enwik8, tinystories)
vocab_size = 257
block_size = 512
sampler = 'blocks'               # non-overlapping 513-symbol blocks, shuffled once, without replacement
batch_size = 8
gradient_accumulation_steps = 1
max_iters = 20000
learning_rate = 1e-3
warmup_iters = 2000
schedule = 'constant'
weight_decay = 0.01
beta1 = 0.9
beta2 = 0.999
grad_clip = 1.0
dtype = 'float32'
eval_interval = 2000
eval_iters = 50
seed = 11                        # the paper's seeds: 11, 23, 37
