# The depth task's causal workspace (tools.results depth, once the gate holds): one shared block of the GPT
# 3L's width applied n_rounds = 6 times in training (the GPT 6L's depth); read at rounds 1 ... 8 against the
# same model trained at one round.
base = 'recipe.py'
out_dir = 'out-results/depth/workspace'
model = 'workspace'
variant = 'workspace'
n_embd = 64
n_head = 4
d_ff = 256
n_rounds = 6
n_slots = 4
slot_dim = 16                      # m = one head's width, as the paper's 32 at d 224 is about one of its 7 heads
