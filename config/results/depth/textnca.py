# The depth task's Hier-TextNCA (tools.results depth, once the gate holds): three stages of the GPT 3L's
# width, windows (2, 8, 32) over the 64-symbol block, Ts = 2 iterations each in training (six cell steps, the
# GPT 6L's depth); read at Ts 1 ... 8 against the same model trained at Ts = 1. Its receptive field,
# 1 + Ts (1 + 7 + 31), is 40 at Ts = 1: the scored answer's prompt (31 characters) is in view at every Ts.
base = 'recipe.py'
out_dir = 'out-results/depth/textnca'
model = 'textnca'
n_embd = 64
n_head = 4
d_ff = 256
windows = (2, 8, 32)
Ts = 2
