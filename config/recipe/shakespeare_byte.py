# Tiny Shakespeare bytes on a CPU, cpu_workspace.py's recipe at block 128 and 1000 iterations (at 800 the
# curves still fell 0.05 bits per 100): the workspace paper's protocol (257 symbols, non-overlapping blocks)
# for python -m tools.results workspace. Not a model: config/results/workspace/*.py name it after their model's config.
dataset = 'shakespeare_byte'       # python prepare_data.py shakespeare --tokenizer byte
block_size = 128
batch_size = 8
max_iters = 1000
lr_decay_iters = 1000
learning_rate = 2e-3
min_lr = 2e-4
warmup_iters = 100
schedule = 'cosine'
beta2 = 0.99
eval_interval = 100
eval_iters = 20
log_interval = 25
device = 'cpu'
compile = False
