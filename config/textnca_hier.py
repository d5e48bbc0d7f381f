# Hier-TextNCA flagship: staged [8,32,128] x Ts=4, GRU gate, learned steps. Tables 2, 3, 5, 6, 7 (Ts=4). Paper 30.8M, PPL 60.3
# Each textnca/textnca_*.py ablation is this file with only the fields it changes.
base = 'recipe/textnca.py'
out_dir = 'out-textnca_hier'
model = 'textnca'
n_embd = 512
n_head = 8
d_ff = 2048
windows = (8, 32, 128)
Ts = 4
orchestration = 'staged'
gate = 'gru'
step_embed = 'learned'
kernel = 'softmax'
stochastic_Ts = ()
dropout = 0.0
grad_checkpoint = False             # ~14 GiB at 32 x 512 without it; recomputation would add ~26% uncounted FLOPs
