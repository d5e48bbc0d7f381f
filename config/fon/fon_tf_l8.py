# Depth-aligned Transformer L8 (Table 2: 34.17M; here 34,171,392).
base = '../fon_tf_d256.py'
out_dir = 'out-fon_tf_l8'
n_layer = 8
