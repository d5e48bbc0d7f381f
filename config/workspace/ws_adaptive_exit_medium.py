# Causal latent workspace paper, 101.71M budget. Adaptive-exit mixture (row 3): shared loop, an affine router on e mixes the four exits.
# 101,708,452 parameters (-1,262).
base = ('../workspace_small.py', '../recipe/workspace_medium.py')
out_dir = 'out-ws_adaptive_exit_medium'
variant = 'adaptive_exit'
n_embd = 3072
n_head = 24
d_ff = 9888
