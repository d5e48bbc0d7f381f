# Causal latent workspace paper, 0.918M budget. Adaptive-exit mixture (row 3): shared loop, an affine router on e mixes the four exits.
# 918,524 parameters (+81).
base = '../workspace_small.py'
out_dir = 'out-ws_adaptive_exit_small'
variant = 'adaptive_exit'
n_embd = 256
n_head = 8
d_ff = 760
