# FON-PC-T2 (Table 2: 30.52M, PPL 126.75): the same weights, the drafting trunk run twice.
base = '../fon_d256_t1.py'
out_dir = 'out-fon_d256_t2'
num_recur = 2
