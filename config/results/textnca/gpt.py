# tools/results.py textnca: the 6-layer GPT of the demo's size (0.53M vs the TextNCA demo's 0.51M), TextNCA
# paper Table 3's Transformer control on tiny Shakespeare characters.
base = '../../recipe/shakespeare_char.py'
out_dir = 'out/results/textnca/gpt'
eval_interval = 100
max_iters = 1000
lr_decay_iters = 1000
learning_rate = 2e-3
min_lr = 2e-4
model = 'gpt'
n_layer = 6
n_embd = 84
n_head = 4
