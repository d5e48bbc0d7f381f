# Causal latent workspace paper, 0.918M budget. Anchored conditioned-dense (row 5): anchored loop + zero-initialised per-round
# scale/shift before the block and an element-wise readout of the earlier exits.
# 918,241 parameters (-202).
base = '../workspace_small.py'
out_dir = 'out-ws_conditioned_dense_small'
variant = 'conditioned_dense'
d_ff = 737
