# Causal latent workspace paper, 101.71M budget. Causal workspace (row 6): anchored shared loop + causal slot workspace, recomputed each round.
# 101,709,714 parameters (the paper: 101.71M).
base = ('workspace_small.py', 'recipe/workspace_medium.py')
out_dir = 'out-workspace_medium'
n_embd = 2560
n_head = 20
d_ff = 9994                        # solved for 101.71M; not a multiple of 8, which can cost tensor-core tiling (9992 gives 101.70M)
slot_dim = 128
