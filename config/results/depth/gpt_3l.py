# The depth task's gate (tools.results depth): a 3-layer GPT should fall behind a 6-layer one from
# k = 3 on if depth is the bottleneck; only then do the looped models' depth sweeps mean anything.
base = 'recipe.py'
out_dir = 'out-results/depth/gpt_3l'
model = 'gpt'
pos = 'rope'                       # relative positions: with learned ones the lookup had not formed by 2,500 iterations
n_layer = 3
n_head = 4
n_embd = 64
