# Sec. A.3 / Fig. 5: single scale (w=32, T=12) with a causal conv, kernel 32. Paper 29.0M, PPL 172.
# The paper says "depthwise", but only a dense Conv1d(d, d, 32) with a d x d projection fits its
# 29.0M (28,980,224 here); kernel = 'dwconv' is the depthwise reading (20,345,344).
base = '../textnca_hier.py'
out_dir = 'out-textnca_l1_conv'
windows = (32,)
Ts = 12
orchestration = 'single'
kernel = 'conv'
