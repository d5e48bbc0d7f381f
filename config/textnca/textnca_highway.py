# Sec. A.4: highway gate, g = sigmoid(W h).
base = '../textnca_hier.py'
out_dir = 'out-textnca_highway'
gate = 'highway'
