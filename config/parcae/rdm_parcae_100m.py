# Parcae-100M in the RDM setup (paper Table 17, Table 3): 113,189,888 parameters (Table 17 prints
# 114,242,560, the RDM-100M number). Its baseline, config/parcae/rdm_100m.py (same shapes, data and
# recipe; no prelude norm and no C, as Table 17's count), with Parcae's injection and depth sampling.
base = 'rdm_100m.py'
out_dir = 'out-rdm_parcae_100m'
injection = 'diagonal'    # Parcae: A_bar = exp(-Delta A), B_bar = Delta B
block = 'prenorm'         # no residual normalisation needed once rho(A_bar) < 1
depth_sampling = 'per_sequence'
