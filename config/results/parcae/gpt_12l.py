# tools.results parcae: the depth ceiling, gpt.py at twice the layers and the same width (12 x d 128, d_ff 534):
# about Parcae's FLOPs per token (2 + 4 x 2 + 2 = 12 block applications at mean depth 4) at twice its parameters.
base = 'gpt.py'
out_dir = 'out-results/parcae/gpt_12l'
n_layer = 12
