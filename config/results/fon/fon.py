# tools.results fon: config/cpu_fon.py (891,908 parameters), FON-PC for the length extrapolation of the FON
# paper's Sec. 4.3 and the pretraining of its Table 5 infill.
base = '../../cpu_fon.py'
out_dir = 'out-results/fon/fon'
eval_interval = 100
max_iters = 1500
lr_decay_iters = 1500
