# Causal latent workspace paper, 0.918M budget. Fixed shared loop (row 2): one block applied four times, h^{r+1} = T(h^r).
# 918,522 parameters (+79).
base = '../workspace_small.py'
out_dir = 'out-ws_shared_loop_small'
variant = 'shared_loop'
n_embd = 256
n_head = 8
d_ff = 762
