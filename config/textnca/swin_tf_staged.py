# Table 2/3: SWin-TF-Staged, layer windows [8,8,32,32,128,128], no iteration or sharing. Paper 35.5M, PPL 64.5
base = 'tf_6l.py'
out_dir = 'out-swin_tf_staged'
windows = (8, 8, 32, 32, 128, 128)
