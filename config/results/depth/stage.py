# One stage of the depth gate's curriculum, after a GPT's config (tools/results.py depth): hop counts
# 1 ... N only (--dataset=hopsN, python prepare_data.py hopsN), from the stage before's weights
# (--init_from), N = 1 ... 5; the last stage's weights start the task. Straight on the task neither GPT
# learned even the one-hop lookup in 10,000 iterations (every hop count at chance); after a one-hop
# stage alone k = 1 stayed exact but k = 2 ... 6 sat near chance through 10,000 iterations of it.
out_dir = 'out-results/depth/stage'
dataset = 'hops1'
max_iters = 1000
eval_interval = 250
