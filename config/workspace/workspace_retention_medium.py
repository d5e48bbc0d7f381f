# Causal latent workspace paper, 101.71M budget, retention study (Table 5, third row): summaries blend
# with the preceding round's, M^r = rho_r M^{r-1} + (1 - rho_r) M~^r, rho_r = sigmoid(l_r) from 0.2.
# 101,709,714 parameters.
base = ('../workspace_small.py', '../recipe/workspace_medium.py')
out_dir = 'out-workspace_retention_medium'
n_embd = 2560
n_head = 20
d_ff = 9994
slot_dim = 128
retention = True
