# Causal latent workspace paper, 101.71M budget. Plain Transformer (row 1): four distinct pre-norm blocks, learned positions, untied head.
# 101,715,772 parameters (+6,058: the paper's largest gap).
base = ('ws_gpt_small.py', '../recipe/workspace_medium.py')
out_dir = 'out-ws_gpt_medium'
n_head = 12
n_embd = 1536
d_ff = 5071
