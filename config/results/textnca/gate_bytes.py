# The second setting of the update-gate study (docs/textnca.md): bytes of tiny Shakespeare
# (python prepare_data.py shakespeare_char --tokenizer byte), the paper's windows (8, 32, 128) at width
# 128 over block 256, 400 iterations: the setting where an update-gate bias of -2 learned more slowly.
base = '../../cpu_textnca.py'
dataset = 'shakespeare_char_byte'
out_dir = 'out-results/textnca/gate_bytes'
eval_interval = 100
n_embd = 128
n_head = 4
d_ff = 512
block_size = 256
batch_size = 4
windows = (8, 32, 128)
Ts = 4
max_iters = 400
lr_decay_iters = 400
