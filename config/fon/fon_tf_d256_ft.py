# The same-recipe causal Transformer infill control (Table 5: fill 0.051): hole fine-tuning
# of fon_tf_d256; a causal model predicts the hole from its prefix only.
base = ('../fon_tf_d256.py', '../recipe/fon_holes.py')
out_dir = 'out-fon_tf_d256_ft'
init_from = 'out-fon_tf_d256'
