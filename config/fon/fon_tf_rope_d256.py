# Positional-engineering control (Sec. 4.3: RoPE +18.6% from 256 to 2048), the matched 8k-step budget.
base = '../fon_tf_d256.py'
out_dir = 'out-fon_tf_rope_d256'
pos = 'rope'
n_positions = None                 # no position table
max_iters = 8000
lr_decay_iters = 8000
