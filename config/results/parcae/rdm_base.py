# tools/results.py parcae: the base RDM of Parcae paper Table 2, results/parcae/rdm.py without residual
# normalisation: pre-norm blocks instead of the sandwich (norm before and after each sublayer).
base = 'rdm.py'
out_dir = 'out/results/parcae/rdm_base'
block = 'prenorm'
