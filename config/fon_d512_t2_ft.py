# Hole fine-tuning of FON-PC-T2 at d 512 (Table 5: fill 0.273).
base = ('fon_d512_t2.py', 'recipe/fon_holes.py')
out_dir = 'out-fon-d512-t2-ft'
init_from = 'out-fon-d512-t2'
