# FON-AR-T2 at d 512, the drafting-only control of Table 3.
base = '../fon_d256_t1.py'
out_dir = 'out-fon_d512_ar_t2'
num_recur = 2
coupling = 'AR'
n_embd = 512
