# Positional-engineering control (Sec. 4.3: ALiBi +2.6% from 256 to 2048), the matched 8k-step budget.
base = '../fon_tf_d256.py'
out_dir = 'out-fon_tf_alibi_d256'
pos = 'alibi'
n_positions = None                 # no position table
max_iters = 8000
lr_decay_iters = 8000
