# The depth task's Parcae (tools.results depth, once the gate holds): the GPT 3L's width and one layer
# each of prelude, looped block and coda, looped mean_recurrence = 4 times in training (1 + 4 + 1 layers
# applied, the GPT 6L's depth); read at num_recur 1 ... 8 against Parcae mu=1 (trained with the loop run once).
base = 'recipe.py'
out_dir = 'out-results/depth/parcae'
model = 'parcae'
n_embd = 64
n_head = 4
n_prelude = 1
n_recur_layers = 1
n_coda = 1
mean_recurrence = 4
mean_backprop_depth = 2            # ceil(mu_rec / 2), the paper's default
