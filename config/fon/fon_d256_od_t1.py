# FON-OD (Table 2: 30.73M; here 30,315,812, -1.3%): the revision organ runs on demand, only for
# holes (the causal stream is the drafting organ alone).
base = '../fon_d256_t1.py'
out_dir = 'out-fon_d256_od_t1'
coupling = 'OD'
