# FON-OD (Table 2: 30.73M; here 30,315,732, -1.3%): the revision organ runs on demand, only for
# holes (the causal stream is the drafting organ alone).
out_dir = 'out-fon-d256-od-t1'

model = 'fon'
n_layer = 4
n_embd = 256
num_recur = 1                     # trunk recursion: T1 = 1, T2 = 2
coupling = 'OD'

# the paper's recipe (Sec. 4.1 / Methods): AdamW 3e-4, betas (0.9, 0.95), wd 0.1, warmup 300,
# cosine over 20k steps, clip 1.0, batch 16 x seq 256, fp32, synthetic skills mixed in at 0.35
dataset = 'wikitext103'            # python prepare_data.py wikitext103
synth_dataset = 'synthetic_gpt2'   # python prepare_data.py synthetic --tokenizer gpt2
p_synth = 0.35
vocab_size = 50304
block_size = 256
batch_size = 16
gradient_accumulation_steps = 1
learning_rate = 3e-4
beta1 = 0.9
beta2 = 0.95
weight_decay = 0.1
grad_clip = 1.0
schedule = 'cosine'
warmup_iters = 300
max_iters = 20000
lr_decay_iters = 20000
min_lr = 3e-5                      # not in the paper: nanoGPT's lr / 10
dtype = 'float32'
eval_interval = 1000
eval_iters = 50
log_interval = 50
