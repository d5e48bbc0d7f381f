# Table 2/3: SWin-TF-6L, every layer w=128. Paper 35.5M, PPL 63.2
base = 'tf_6l.py'
out_dir = 'out-swin_tf_6l'
windows = 128
