# tools.results workspace, the second size: anchored.py at 3/8 of the width (d 84, 7 heads of 12), d_ff 281 the
# integer nearest workspace_small.py's count (152,237 against 152,229), trained as workspace_small.py.
base = ('../../workspace_small.py', '../../recipe/shakespeare_byte.py')   # as anchored.py
variant = 'anchored'
out_dir = 'out-results/workspace/anchored_small'
n_embd = 84
d_ff = 281
eval_interval = 300
max_iters = 2700
lr_decay_iters = 2700
