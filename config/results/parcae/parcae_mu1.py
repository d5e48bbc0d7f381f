# tools.results parcae: Parcae at fixed depth 1 (the paper's mu_rec = 1 control): parcae.py's model and
# schedule, the loop run once in training and eval, so P, R and C make a 6-layer model with the injection in the
# middle.
base = '../../cpu_parcae.py'
out_dir = 'out-results/parcae/parcae_mu1'
eval_interval = 100
max_iters = 600
update_clipping = True      # as parcae.py (the RDM's Adam; muon.py turns it off)
adam_atan2 = True
mean_recurrence = 1
mean_backprop_depth = 1
depth_sampling = 'fixed'
