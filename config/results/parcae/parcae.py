# tools.results parcae: config/cpu_parcae.py at 600 iterations with the RDM's Adam (Parcae paper Q.1:
# update clipping, no epsilon), the Parcae row of its Table 2 learning-rate sweep (the lab passes the rate);
# followed by muon.py, the Parcae of Section 5.1 on Table 21's recipe.
base = '../../cpu_parcae.py'
out_dir = 'out-results/parcae/parcae'
eval_interval = 100
max_iters = 600
update_clipping = True
adam_atan2 = True
