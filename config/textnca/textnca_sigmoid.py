# Sec. A.4: plain sigmoid gate (the paper reports it diverges at step 3k).
base = '../textnca_hier.py'
out_dir = 'out-textnca_sigmoid'
gate = 'sigmoid'
