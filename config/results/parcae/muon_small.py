# tools.results parcae, the second size's recipe, after gpt_small.py or parcae_small.py: muon.py trained for
# 4,500 iterations of 12 x 64 tokens (3.5M tokens, 3.4 epochs), its momentum warm-up scaled to them as muon.py's
# (the authors' 300 of 21,362 steps), at the paper's rate, 8e-3, which the lab brackets for each model.
# Not a model.
base = 'muon.py'
out_dir = 'out-results/parcae/muon_small'
learning_rate = 8e-3
max_iters = 4500
eval_interval = 500
muon_momentum_warmup = 63
