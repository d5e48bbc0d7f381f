# Table 3: Universal Transformer, one shared block looped 6 times, global attention, residual. d_ff=3584 (7d) matches the paper's 21.4M (with d_ff 2048 it would be 19.8M). Paper PPL 91.7
base = 'tf_6l.py'
out_dir = 'out-ut'
n_layer = 1
d_ff = 3584
n_loop = 6
