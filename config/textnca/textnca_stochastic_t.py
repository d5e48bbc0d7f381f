# Table 9 / App. E.2 Hier-StochasticT: sinusoidal steps, Ts ~ Uniform{2,4,6} per batch; evaluate with tools/eval.py --Ts sweep
base = '../textnca_hier.py'
out_dir = 'out-textnca_stochastic_t'
step_embed = 'sinusoidal'
stochastic_Ts = (2, 4, 6)
