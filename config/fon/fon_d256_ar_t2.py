# FON-AR-T2, the drafting-only control (Table 2: 30.73M; here 30,315,812, -1.3%: the revision
# organ is built but never runs, so coupling can be switched at inference).
base = '../fon_d256_t1.py'
out_dir = 'out-fon_d256_ar_t2'
num_recur = 2
coupling = 'AR'
