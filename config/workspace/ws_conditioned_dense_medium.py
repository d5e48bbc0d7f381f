# Causal latent workspace paper, 101.71M budget. Anchored conditioned-dense (row 5): anchored loop + zero-initialised per-round
# scale/shift before the block and an element-wise readout of the earlier exits.
# 101,708,936 parameters (-778).
base = ('../workspace_small.py', '../recipe/workspace_medium.py')
out_dir = 'out-ws_conditioned_dense_medium'
variant = 'conditioned_dense'
n_embd = 2560
n_head = 20
d_ff = 10376
