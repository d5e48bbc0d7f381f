# One stage of the depth gate's curriculum, after a GPT's config (tools.results depth): hop counts
# 1 ... N only (--dataset=hopsN, python prepare_data.py hopsN), from the stage before's weights
# (--init_from), N = 1 ... 5; the last stage's weights start the task (--dataset=hops, hop counts 1 ... 6,
# one more stage as long). Straight on the task neither GPT
# learned even the one-hop lookup in 10,000 iterations (every hop count at chance). From one-hop
# weights, the GPT 3L on hop counts 1-2 learned the second hop at lr 3e-3 between iterations 1,500 and
# 2,000 (k = 2 exact by 4,000), and not at 1e-3 in 5,000: a stage is 3,000 iterations, and the gate's
# bracket picks the rate. A stage that ends with its newest hop unlearned is run again from its own end
# (tools/results/spec.py STAGE_REPEATS).
out_dir = 'out-results/depth/stage'
dataset = 'hops1'
max_iters = 3000
eval_interval = 500
