# Parcae-350M in the RDM setup (paper Table 17, Table 3): 378,558,464 parameters. Its baseline,
# config/parcae/rdm_350m.py, with Parcae's injection and depth sampling (as rdm_parcae_100m.py).
base = 'rdm_350m.py'
out_dir = 'out-rdm_parcae_350m'
injection = 'diagonal'    # Parcae: A_bar = exp(-Delta A), B_bar = Delta B
block = 'prenorm'         # no residual normalisation needed once rho(A_bar) < 1
depth_sampling = 'per_sequence'
