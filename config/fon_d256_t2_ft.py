# Hole fine-tuning of FON-PC-T2 (Table 5: fill 0.241).
out_dir = 'out-fon-d256-t2-ft'

model = 'fon'
n_layer = 4
n_embd = 256
num_recur = 2                     # trunk recursion: T1 = 1, T2 = 2
coupling = 'PC'

# hole fine-tuning (Sec. 4.1 / Methods): 4k steps at lr 1e-4 from the pretrained weights
# (init_from = its out_dir: weights only, a fresh optimizer and iteration count), half of the
# sequences holed (p_fill 0.5), stride-8 self-holing with p = 0.15: the hole's token becomes MASK
# in the input and is the target there. The schedule is not given: constant, no warmup.
init_from = 'out-fon-d256-t2'
dataset = 'wikitext103'
synth_dataset = 'synthetic_gpt2'
p_synth = 0.35
p_fill = 0.5
hole_stride = 8
p_hole = 0.15
vocab_size = 50304
block_size = 256
batch_size = 16
learning_rate = 1e-4
beta1 = 0.9
beta2 = 0.95
weight_decay = 0.1
grad_clip = 1.0
schedule = 'constant'
warmup_iters = 0
max_iters = 4000
dtype = 'float32'
eval_interval = 500
eval_iters = 50
log_interval = 50
