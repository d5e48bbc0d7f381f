# The depth task's gate (tools/results.py depth): the answer is k pointer lookups away (battery.py's
# hops, loss on the answer only). A 3-layer GPT should fall behind a 6-layer one from k = 3 on if
# depth is the bottleneck; only then do the looped models' depth sweeps mean anything.
#   python prepare_data.py hops && python train.py config/results/depth/gpt_3l.py
out_dir = 'out-results/depth/gpt_3l'
dataset = 'hops'
loss_on = 'answers'
block_size = 64                    # one example a window (61 characters): with two, the second's lookup also finds
                                   # its letters in the first's listing, and the one-hop stage sat at 2.44 after
                                   # 1,000 iterations, where one example a window reached 0.005
batch_size = 64                    # 4,096 tokens an iteration; at 16 x 128 the one-lookup stage never read the query
eval_interval = 500
eval_iters = 20
model = 'gpt'
pos = 'rope'                       # relative positions: with learned ones the lookup had not formed by 2,500 iterations
n_layer = 3
n_head = 4
n_embd = 64
learning_rate = 1e-3               # 3e-3 did not learn even the candidate letters in 10,000 iterations
min_lr = 1e-4
warmup_iters = 200
max_iters = 10000
