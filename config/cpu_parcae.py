# A small Parcae that trains in minutes on a laptop CPU (tiny Shakespeare, characters): 2/2/2
# layers in P/R/C at d = 128, mu_rec 4 with backprop through the last 2 steps, the paper's
# per-sequence depth sampling. First: python prepare_data.py shakespeare_char
#   python train.py config/cpu_parcae.py
#   python -m tools.eval --out_dir=out-cpu_parcae --sweep=num_recur=1..12
#   python sample.py --out_dir=out-cpu_parcae --num_recur=8
base = 'recipe/shakespeare_char.py'
out_dir = 'out-cpu_parcae'
model = 'parcae'
n_embd = 128
n_head = 4
head_dim = 32
n_prelude = 2
n_recur_layers = 2
n_coda = 2
mean_recurrence = 4
mean_backprop_depth = 2
optimizer = 'adamw'       # the RDM's Adam (Q.1); the paper's own recipe is --optimizer=muon --muon_variant=parcae (Q.2)
learning_rate = 2e-3
beta1 = 0.9
weight_decay = 0.0
schedule = 'trapezoid'
warmup_iters = 50
cooldown_frac = 0.5
min_lr = 0.0
max_iters = 1500
