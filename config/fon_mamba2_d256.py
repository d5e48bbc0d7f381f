# Mamba2 of FON's Table 2 (28.89M; here 29,077,440, +0.65%, counting the tied embedding and head
# twice as the paper does, see fon.py): d 256, L 4, expand 4, d_state 64, head dim 64, head tied to
# the embedding, pure-PyTorch chunked SSD (baselines.Mamba2).
base = 'recipe/fon.py'
out_dir = 'out-fon_mamba2_d256'
model = 'mamba2'
n_layer = 4
n_embd = 256
d_state = 64
expand = 4
headdim = 64
chunk_size = 64
n_loop = 1
tie_weights = True
