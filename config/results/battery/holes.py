# tools.results battery: the hole fine-tuning of config/fon/fon_cpu_battery_ft.py (FON's recipe, every sequence
# holed: each answer span a hole, 2000 iterations at lr 5e-3), read after a pretraining run's config:
#   python train.py config/results/battery/fon.py config/results/battery/holes.py --init_from=out-results/battery/fon
# Not a model: the config before it gives the model (and the bidirectional GPT's causal=False).
base = '../../fon/fon_cpu_battery_ft.py'
out_dir = 'out-results/battery/holes'
