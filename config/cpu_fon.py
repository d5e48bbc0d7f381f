# FON on tiny Shakespeare (characters) on a laptop CPU in minutes: the paper's two phases in
# miniature, hole-free pretraining, then hole fine-tuning from those weights.
# First: python prepare_data.py shakespeare_char   (offline: add --input path/to/input.txt)
#   python train.py config/cpu_fon.py
#   python train.py config/cpu_fon.py --init_from=out-cpu_fon --out_dir=out-cpu_fon_ft \
#       --p_fill=0.5 --max_iters=400 --learning_rate=5e-4 --schedule=constant --warmup_iters=0 \
#       --always_save_checkpoint=True   # the hole-free val loss need not fall while the holes are learned
#   python -m tools.eval --out_dir=out-cpu_fon_ft --infill=True
#   python sample.py --out_dir=out-cpu_fon_ft --infill=True --start="To be, or not to [MASK][MASK], that is"
#   python sample.py --out_dir=out-cpu_fon --max_new_tokens=500   # every token through the O(1) state
base = 'recipe/shakespeare_char.py'
out_dir = 'out-cpu_fon'
model = 'fon'
vocab_size = 66            # 65 characters + the MASK row the hole fine-tuning needs (id 65)
n_layer = 3
n_embd = 128
max_delay = 127
num_recur = 1
coupling = 'PC'
block_size = 128
learning_rate = 2e-3
max_iters = 1500
lr_decay_iters = 1500
min_lr = 2e-4
