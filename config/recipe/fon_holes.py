# FON's hole fine-tuning (Sec. 4.1 / Methods), read after a pretraining config (fon/fon_*_ft.py name
# both): 4k steps at lr 1e-4 from the pretrained weights (init_from = its out_dir: weights only, a
# fresh optimizer and iteration count), half of the sequences holed (p_fill 0.5), stride-8
# self-holing with p = 0.15: the hole's token becomes MASK in the input and is the target there.
# The schedule is not given: constant, no warmup.
p_fill = 0.5
hole_stride = 8
p_hole = 0.15
learning_rate = 1e-4
schedule = 'constant'
warmup_iters = 0
max_iters = 4000
lr_decay_iters = None              # a --schedule=cosine override decays over these 4k steps
eval_interval = 500
