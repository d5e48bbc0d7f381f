# The causal latent workspace paper's larger recipe (Table 2), for the 101.71M budget: a *_medium
# config is its *_small model with this recipe and larger widths. 20k updates of 4 x 2
# (accumulation) sequences x 512 scored targets (81.92M), bf16 autocast, lr linear warmup to 1e-4
# over 2000 updates then constant. The paper names only AdamW: PyTorch AdamW defaults for
# betas/weight decay are this repo's choice.
base = 'workspace.py'
batch_size = 4
gradient_accumulation_steps = 2
learning_rate = 1e-4
dtype = 'bfloat16'
