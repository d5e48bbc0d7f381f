# Hole fine-tuning for config/fon/fon_cpu_battery.py (its header has the commands): FON's recipe at
# CPU scale, except that every sequence is holed (p_fill 1, the paper's 0.5) to make the most of
# few steps: in a synthetic window every answer span is a hole.
base = ('fon_cpu_battery.py', '../recipe/fon_holes.py')
out_dir = 'out-fon_cpu_battery_ft'
p_fill = 1.0
learning_rate = 5e-3          # the pretraining's: the paper fine-tunes at a third of it (Sec. 7); not tried here
max_iters = 2000
eval_interval = 1000          # every eval saves: hole-free val loss is not what fine-tuning improves
