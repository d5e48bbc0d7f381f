# Depth-aligned Transformer L10 (Table 2: 35.75M; here 35,750,912).
base = '../fon_tf_d256.py'
out_dir = 'out-fon_tf_l10'
n_layer = 10
