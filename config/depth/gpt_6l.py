# The depth task's gate, its deep side: config/depth/gpt_3l.py with six layers.
base = 'gpt_3l.py'
out_dir = 'out/depth/gpt_6l'
n_layer = 6
