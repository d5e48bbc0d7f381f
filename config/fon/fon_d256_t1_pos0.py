# FON-PC-T1 without the local position kernel (Fig. 10c 2x2: pos0 costs +2.6..3.4% PPL at d 256).
base = '../fon_d256_t1.py'
out_dir = 'out-fon_d256_t1_pos0'
pos_kernel = 0
