# tools.results parcae: the RDM row of Parcae paper Table 2, config/parcae/rdm_100m.py's choices at
# cpu_parcae's size (1,249,280 parameters vs Parcae's 1,248,128) on parcae.py's recipe.
base = '../../cpu_parcae.py'
out_dir = 'out-results/parcae/rdm'
eval_interval = 100
max_iters = 600
update_clipping = True
adam_atan2 = True
injection = 'linear'
block = 'sandwich'
depth_sampling = 'per_batch'
prelude_norm = False
readout = False
init = 'scaled'
