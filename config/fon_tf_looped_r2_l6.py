# TF-Looped r2 L6 (Table 2: 32.59M; here 32,591,872): six blocks applied twice.
base = 'fon_tf_looped_r2.py'
out_dir = 'out-fon-tf-looped-r2-l6'
n_layer = 6
