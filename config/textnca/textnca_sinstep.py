# Table 6 / Table 9 "SinStep (det.)": sinusoidal step embedding, fixed Ts=4. Paper PPL 119.5
base = '../textnca_hier.py'
out_dir = 'out-textnca_sinstep'
step_embed = 'sinusoidal'
