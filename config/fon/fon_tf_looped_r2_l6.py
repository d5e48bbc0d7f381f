# TF-Looped r2 L6 (Table 2: 32.59M; here 32,591,872): six blocks applied twice.
base = '../fon_tf_d256.py'
out_dir = 'out-fon_tf_looped_r2_l6'
n_loop = 2
n_layer = 6
