# Causal latent workspace paper, 101.71M budget. Fixed shared loop (row 2): one block applied four times, h^{r+1} = T(h^r).
# 101,708,450 parameters (-1,264).
base = ('../workspace_small.py', '../recipe/workspace_medium.py')
out_dir = 'out-ws_shared_loop_medium'
variant = 'shared_loop'
n_embd = 3072
n_head = 24
d_ff = 9890
