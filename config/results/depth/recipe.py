# The depth task's recipe (tools.results depth), shared by the gate's GPTs and the looped models: the
# answer is k pointer lookups away (battery.py's hops, loss on the answer only).
#   python prepare_data.py hops && python train.py config/results/depth/gpt_3l.py
out_dir = 'out-results/depth/recipe'
dataset = 'hops'
loss_on = 'answers'
block_size = 64                    # one example a window (61 characters): with two, the second's lookup also finds
                                   # its letters in the first's listing, and the one-hop stage sat at 2.44 after
                                   # 1,000 iterations, where one example a window reached 0.005
batch_size = 64                    # 4,096 tokens an iteration; at 16 x 128 the one-lookup stage never read the query
eval_interval = 500
eval_iters = 20
learning_rate = 1e-3               # 3e-3 did not learn even the candidate letters in 10,000 iterations
min_lr = 1e-4
warmup_iters = 200
max_iters = 10000
