# Table 3: Transformer-6L, global attention, learned positions, tied head. Paper 35.5M, PPL 52.8
# tf_12l.py, swin_tf_*.py and ut.py (this folder) are this file with only the fields they change.
base = '../recipe/textnca.py'
out_dir = 'out-tf_6l'
model = 'gpt'
n_layer = 6
n_head = 8
n_embd = 512
d_ff = 2048
bias = True
pos = 'learned'
norm = 'layer'
mlp = 'gelu'
tie_weights = True
dropout = 0.0
