# Hole fine-tuning of FON-PC-T2 (Table 5: fill 0.241).
base = ('../fon_d256_t1.py', '../recipe/fon_holes.py')
out_dir = 'out-fon_d256_t2_ft'
init_from = 'out-fon_d256_t2'
num_recur = 2
