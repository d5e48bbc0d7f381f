# FON-PC-T2 at the d 512 tier (Table 3, PPL 91.46; the paper calls it the 70M tier).
base = '../fon_d256_t1.py'
out_dir = 'out-fon_d512_t2'
num_recur = 2
n_embd = 512
