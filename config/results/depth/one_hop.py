# The depth gate's first stage, after a GPT's config (tools/results.py depth): every query one hop
# (python prepare_data.py hops1) for 1,000 iterations; its weights start the mixed task (--init_from).
# Straight on the mixed task neither GPT learned even the one-hop lookup in 10,000 iterations (every
# hop count at chance); after this stage k = 1 stayed exact through 3,000 iterations of it.
out_dir = 'out-results/depth/one_hop'
dataset = 'hops1'
max_iters = 1000
eval_interval = 250
