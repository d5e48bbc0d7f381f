# FON's Table 8 split at CPU scale: pretrain on the synthetic battery (hole-free), hole fine-tune
# (every answer span a hole: the task-given holes), then read the battery in fill mode beside the
# controls: the Transformer trained causally, one trained as a bidirectional encoder (causal=False:
# full attention, the loss at the holes, from the start), and Mamba2. One config for the models
# (--model picks one, each at d 64, L 2 with its own defaults otherwise):
#   python prepare_data.py synthetic
#   python train.py config/fon/fon_cpu_battery.py --model=fon --out_dir=out-fon_cpu_battery_fon
#   python train.py config/fon/fon_cpu_battery_ft.py --model=fon --init_from=out-fon_cpu_battery_fon \
#       --out_dir=out-fon_cpu_battery_ft_fon
#   (the same two lines with --model=gpt and --model=mamba2, and with --model=gpt --causal=False --p_fill=1.0)
#   python -m tools.eval --compare out-fon_cpu_battery_ft_{fon,gpt,gpt_bi,mamba2} --battery
# python -m tools.results battery runs all of it (config/results/battery/).
# On a shared CPU, OMP_NUM_THREADS=1 avoids thread oversubscription (here 17x slower without it).
out_dir = 'out-fon_cpu_battery'   # one model's: --out_dir=out-fon_cpu_battery_<model> keeps them apart
dataset = 'synthetic'
vocab_size = 45            # 44 symbols + the MASK row hole fine-tuning needs (id 44)
block_size = 96            # every battery example fits (the longest, mem_l, is under 92)
batch_size = 16
n_layer = 2
n_embd = 64
learning_rate = 5e-3
min_lr = 5e-4
warmup_iters = 50
max_iters = 400
lr_decay_iters = 400
beta2 = 0.99
weight_decay = 0.1
eval_interval = 200
eval_iters = 10
log_interval = 50
device = 'cpu'
compile = False
