# The depth task's gate, its deep side: config/results/depth/gpt_3l.py with six layers.
base = 'gpt_3l.py'
out_dir = 'out-results/depth/gpt_6l'
n_layer = 6
