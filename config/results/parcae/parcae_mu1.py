# tools/results.py parcae: Parcae at fixed depth 1 (the paper's mu_rec = 1 control): parcae.py's weights, the loop
# run once in training and eval, so P, R and C make a 6-layer model with the injection in the middle.
base = 'parcae.py'
out_dir = 'out/results/parcae/parcae_mu1'
mean_recurrence = 1
mean_backprop_depth = 1
depth_sampling = 'fixed'
