# Table 5: sigmoid gate g u + (1-g) h with dropout on u (rate not given; 0.1 chosen). Paper 27.7M, PPL 71.7
base = '../textnca_hier.py'
out_dir = 'out-textnca_sigmoid_dropout'
gate = 'sigmoid'
dropout = 0.1
