# Hole fine-tuning of FON-PC-T1 (Table 5: fill 0.233).
base = ('../fon_d256_t1.py', '../recipe/fon_holes.py')
out_dir = 'out-fon_d256_t1_ft'
init_from = 'out-fon_d256_t1'
