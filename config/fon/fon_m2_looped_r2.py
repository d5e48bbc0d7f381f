# M2-Looped r2 (Table 2: 29.71M; here the Mamba2 weights applied twice, 29,077,440, -2.1%).
base = '../fon_mamba2_d256.py'
out_dir = 'out-fon_m2_looped_r2'
n_loop = 2
