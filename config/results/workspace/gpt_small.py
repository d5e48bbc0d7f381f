# tools.results workspace, the second size: gpt.py at 3/8 of the width (d 48, 4 heads of 12), d_ff 213 the
# integer nearest workspace_small.py's count (152,148 against 152,229), trained as workspace_small.py.
base = ('../../workspace/ws_gpt_small.py', '../../recipe/shakespeare_byte.py')   # as gpt.py
out_dir = 'out-results/workspace/gpt_small'
n_embd = 48
d_ff = 213
eval_interval = 300
max_iters = 2700
lr_decay_iters = 2700
