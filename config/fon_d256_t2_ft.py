# Hole fine-tuning of FON-PC-T2 (Table 5: fill 0.241).
base = ('fon_d256_t2.py', 'recipe/fon_holes.py')
out_dir = 'out-fon-d256-t2-ft'
init_from = 'out-fon-d256-t2'
