# tools.results workspace, the second size: workspace.py at 3/8 of the width, the head counts kept (d 84, 7 heads
# of 12; slots of m = 12, the head width, as at both of the paper's sizes; d_ff 241 = 3/8 of 643): 152,229
# parameters, 119,889 non-embedding. Each row matches it by its d_ff, as at the first size. Trained for 2,700
# iterations of 8 x 128 bytes (2.8M bytes, 2.8 epochs): 20.7-24.0 bytes per non-embedding parameter over the six
# rows (the first size: 1.3-1.4), the papers' regime.
base = ('../../workspace_small.py', '../../recipe/shakespeare_byte.py')   # as workspace.py
out_dir = 'out-results/workspace/workspace_small'
n_embd = 84
d_ff = 241
slot_dim = 12
eval_interval = 300
max_iters = 2700
lr_decay_iters = 2700
