# Causal latent workspace paper, 101.71M budget. Anchored shared loop (row 4): anchor fusion (Equation 2) then the shared block, no workspace.
# 101,711,502 parameters (+1,788).
base = ('../workspace_small.py', '../recipe/workspace_medium.py')
out_dir = 'out-ws_anchored_medium'
variant = 'anchored'
n_embd = 2560
n_head = 20
d_ff = 10382
