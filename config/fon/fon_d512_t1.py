# FON-PC-T1 at d 512 (Table 3, PPL 93.83).
base = '../fon_d256_t1.py'
out_dir = 'out-fon_d512_t1'
n_embd = 512
