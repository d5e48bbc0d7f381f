# tools.results workspace, the second size: adaptive_exit.py at 3/8 of the width (d 96, 8 heads of 12), d_ff 271
# the integer nearest workspace_small.py's count (152,243 against 152,229), trained as workspace_small.py.
base = ('../../workspace_small.py', '../../recipe/shakespeare_byte.py')   # as adaptive_exit.py
variant = 'adaptive_exit'
n_head = 8
out_dir = 'out-results/workspace/adaptive_exit_small'
n_embd = 96
d_ff = 271
eval_interval = 300
max_iters = 2700
lr_decay_iters = 2700
