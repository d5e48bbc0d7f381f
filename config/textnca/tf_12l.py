# Table 3: Transformer-12L. Paper 54.5M, PPL 44.7
base = 'tf_6l.py'
out_dir = 'out-tf_12l'
n_layer = 12
