# tools.results parcae: the base RDM of Parcae paper Table 2: rdm.py without residual normalisation, pre-norm
# blocks instead of the sandwich (norm before and after each sublayer); tests/test_results.py checks that the two
# differ in nothing else.
base = '../../cpu_parcae.py'
out_dir = 'out-results/parcae/rdm_base'
eval_interval = 100
max_iters = 600
update_clipping = True
adam_atan2 = True
injection = 'linear'
depth_sampling = 'per_batch'
prelude_norm = False
readout = False
init = 'scaled'
block = 'prenorm'
