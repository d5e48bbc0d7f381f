# TF-Looped r2 (Table 2: 31.01M; here 31,012,352): the L4 weights applied twice.
base = '../fon_tf_d256.py'
out_dir = 'out-fon_tf_looped_r2'
n_loop = 2
