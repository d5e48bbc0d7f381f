# FON-PC-T1, the paper's main model (Table 2: 30.52M; here 30,315,812, -0.67%, the tied embedding
# and head counted twice as the paper does; num_params() counts it once: 17,437,988): d 256, L 4,
# persistent coupling, one pass of the drafting trunk. The other fon_d*.py (config/fon/) are this
# file with only what they change; fon/fon_*_ft.py add the hole fine-tuning of config/recipe/fon_holes.py.
#   python train.py config/fon_d256_t1.py; then config/fon/fon_d256_t1_ft.py for the holes
base = 'recipe/fon.py'
out_dir = 'out-fon_d256_t1'
model = 'fon'
n_layer = 4
n_embd = 256
num_recur = 1                     # trunk recursion: T1 = 1, T2 = 2
coupling = 'PC'
