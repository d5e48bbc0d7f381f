# tools.results parcae: a setting where depth can matter, after a model config and muon.py: the synthetic
# battery (python prepare_data.py synthetic), whose add, state_l, cmp and sort_rel answers need several steps of
# computation. Block 96 holds every example; 8 x 96 tokens per step, as 12 x 64 on tiny Shakespeare.
# Not a model.
out_dir = 'out-results/parcae/battery'
dataset = 'synthetic'
block_size = 96
batch_size = 8
