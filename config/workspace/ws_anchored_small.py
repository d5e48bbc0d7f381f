# Causal latent workspace paper, 0.918M budget. Anchored shared loop (row 4): anchor fusion (Equation 2) then the shared block, no workspace.
# 918,471 parameters (+28).
base = '../workspace_small.py'
out_dir = 'out-ws_anchored_small'
variant = 'anchored'
d_ff = 743
