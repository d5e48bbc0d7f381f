# tools.results workspace, the second size: conditioned_dense.py at 3/8 of the width (d 84, 7 heads of 12),
# d_ff 275 the integer nearest workspace_small.py's count (152,147 against 152,229), trained as workspace_small.py.
base = ('../../workspace_small.py', '../../recipe/shakespeare_byte.py')   # as conditioned_dense.py
variant = 'conditioned_dense'
out_dir = 'out-results/workspace/conditioned_dense_small'
n_embd = 84
d_ff = 275
eval_interval = 300
max_iters = 2700
lr_decay_iters = 2700
