# tools/results.py fon: hole fine-tuning at CPU scale (FON paper Table 5), read after a pretraining run's config:
#   python train.py config/results/fon/fon.py config/results/fon/holes.py --init_from=out/results/fon/fon
# Not a model: it names no base, the pretraining config before it gives the model.
out_dir = 'out/results/fon/holes'
p_fill = 0.5
max_iters = 400
learning_rate = 5e-4
schedule = 'constant'
warmup_iters = 0
