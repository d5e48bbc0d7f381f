# FON-AR-T2, the drafting-only control (Table 2: 30.73M; here 30,315,812, -1.3%: the revision
# organ is built but never runs, so coupling can be switched at inference).
base = 'fon_d256_t2.py'
out_dir = 'out-fon-d256-ar-t2'
coupling = 'AR'
