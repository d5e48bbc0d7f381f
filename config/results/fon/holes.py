# tools.results fon: hole fine-tuning at CPU scale (FON paper Table 5), read after a pretraining run's config:
#   python train.py config/results/fon/fon.py config/results/fon/holes.py --init_from=out-results/fon/fon
# Not a model: it names no base, the pretraining config before it gives the model. The paper's recipe
# (stride-8 holes with p 0.15, constant rate a third of pretraining's, no warm-up) except that every sequence
# is holed (p_fill 1, the paper's 0.5): two holes per sequence is little signal for a few hundred steps.
# tools/results passes a third of each pretraining run's own (bracketed) rate; 2e-3 / 3 here is a third of
# config/cpu_fon.py's.
out_dir = 'out-results/fon/holes'
p_fill = 1.0
max_iters = 6000     # the last leg: tools/results stops earlier once every arm fills above its LM prior
learning_rate = 6.7e-4
schedule = 'constant'
warmup_iters = 0
