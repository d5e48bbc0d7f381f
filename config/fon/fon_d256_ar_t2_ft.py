# Hole fine-tuning of the drafting-only FON-AR-T2 (Table 5: fill 0.194, the LM prior).
base = ('../fon_d256_t1.py', '../recipe/fon_holes.py')
out_dir = 'out-fon_d256_ar_t2_ft'
init_from = 'out-fon_d256_ar_t2'
num_recur = 2
coupling = 'AR'
