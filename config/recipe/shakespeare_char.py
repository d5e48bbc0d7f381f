# Tiny Shakespeare, characters, on a laptop CPU in minutes, as in nanoGPT's CPU recipe: shared by
# cpu_shakespeare_char.py, cpu_textnca.py, cpu_fon.py and cpu_parcae.py, which add a model, its
# learning rate and length. Not a model: those configs name it as their base.
dataset = 'shakespeare_char'       # python prepare_data.py shakespeare_char   (offline: add --input path/to/input.txt)
eval_interval = 250
eval_iters = 20
log_interval = 10
always_save_checkpoint = False
block_size = 64
batch_size = 12
beta2 = 0.99
warmup_iters = 100
device = 'cpu'
compile = False
