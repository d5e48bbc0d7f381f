# The Transformer of FON's Table 2 (30.99M; here 31,012,352 +0.07%, counting the tied embedding and
# head twice as the paper does, see fon.py): GPT-2 blocks, d 256, L 4, learned absolute positions
# (a table of 8192: L8 34.17M and L10 35.75M then match exactly), head tied to the embedding.
# With --max_iters=8000 it is the absolute-PE control of the extrapolation study.
# The other fon_tf_*.py (config/fon/) are this file with only what they change.
base = 'recipe/fon.py'
out_dir = 'out-fon_tf_d256'
model = 'gpt'
n_layer = 4
n_head = 4
n_embd = 256
pos = 'learned'
tie_weights = True                 # as FON's (Methods: embedding and head shared)
n_loop = 1
n_positions = 8192                 # the learned table that gives 30.99M (Table 2); training uses 256 of it
