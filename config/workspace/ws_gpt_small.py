# Causal latent workspace paper, 0.918M budget. Plain Transformer (row 1): four distinct pre-norm blocks, learned positions, untied head.
# 918,504 parameters (+61 vs the workspace model).
base = '../recipe/workspace.py'
out_dir = 'out-ws_gpt_small'
model = 'gpt'
n_layer = 4
n_head = 4
n_embd = 128
d_ff = 506
pos = 'learned'
norm = 'layer'
mlp = 'gelu'
bias = True
tie_weights = False
