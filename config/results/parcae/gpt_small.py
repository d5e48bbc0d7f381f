# tools.results parcae, the second size: gpt.py at Parcae's small width (d 48, 4 heads of 12), d_ff 200 the
# integer nearest parcae_small.py's count (183,984 against 184,128), as d_ff 534 matches at the first size;
# followed by muon_small.py.
base = 'gpt.py'
out_dir = 'out-results/parcae/gpt_small'
n_embd = 48
n_head = 4
head_dim = 12
d_ff = 200
