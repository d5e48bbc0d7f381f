# Causal latent workspace paper, 0.918M budget. Causal workspace (row 6): anchored shared loop + causal slot workspace, recomputed each round.
# 918,443 parameters. The other rows, workspace/ws_*_small.py, are this file with their variant and widths.
base = 'recipe/workspace.py'
out_dir = 'out-workspace_small'
model = 'workspace'
variant = 'workspace'
n_embd = 224
n_head = 7
d_ff = 643
slot_dim = 32
n_slots = 4
n_rounds = 4
