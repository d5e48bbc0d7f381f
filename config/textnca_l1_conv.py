# Sec. A.3 / Fig. 5: single scale (w=32, T=12) with a causal depthwise conv, kernel 32. Paper PPL 172 (its 29.0M count is not reproduced: 20.3M here)
base = 'textnca_l1.py'
out_dir = 'out-textnca-l1-conv'
kernel = 'conv'
