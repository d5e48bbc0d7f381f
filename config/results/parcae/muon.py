# tools.results parcae: the Parcae paper's own recipe (Table 21, Section Q.2: the nanochat setup's two groups,
# Muon for the hidden matrices, AdamW for the rest) for Parcae and the GPT alike, after their model config:
#   python train.py config/results/parcae/gpt.py config/results/parcae/muon.py --learning_rate=8e-3
# Not a model. One learning rate for both groups (the paper's best for both is 8e-3); the lab sweeps it.
out_dir = 'out-results/parcae/muon'
optimizer = 'muon'
muon_variant = 'parcae'      # Section Q.2: Polar Express, factored variance reduction, cautious weight decay
muon_lr = None               # = learning_rate
muon_momentum = 0.95
muon_momentum_start = 0.85
muon_momentum_warmup = 8     # the authors' 300 of 21,362 steps, scaled to this run's 600
muon_weight_decay = 0.2
muon_wd_decay = True         # linearly to 0 over the run
beta1 = 0.8
beta2 = 0.95
eps = 1e-10
weight_decay = 0.0
update_clipping = False      # the RDM's Adam (Q.1) only
adam_atan2 = False
grad_clip = 1.0
schedule = 'trapezoid'       # fixed rate, no warmup, linear cooldown over the last half
warmup_iters = 0
cooldown_frac = 0.5
min_lr = 0.0
