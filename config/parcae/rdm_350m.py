# RDM-350M, the recurrent-depth baseline of Geiping et al. as trained in the Parcae paper (Table 17,
# Table 3): 382,765,056 parameters; rdm_100m.py at the larger shape. Parcae on the same setup:
# config/parcae/rdm_parcae_350m.py.
base = 'rdm_100m.py'
out_dir = 'out-rdm_350m'
n_embd = 2048
n_head = 16
d_ff = 7040
n_recur_layers = 2
mean_recurrence = 8
mean_backprop_depth = 4
learning_rate = 2e-4
