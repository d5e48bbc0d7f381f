# FON-AR-T2 at d 512, the drafting-only control of Table 3.
base = 'fon_d256_ar_t2.py'
out_dir = 'out-fon-d512-ar-t2'
n_embd = 512
