# Hole fine-tuning of the drafting-only FON-AR-T2 (Table 5: fill 0.194, the LM prior).
base = ('fon_d256_ar_t2.py', 'recipe/fon_holes.py')
out_dir = 'out-fon-d256-ar-t2-ft'
init_from = 'out-fon-d256-ar-t2'
