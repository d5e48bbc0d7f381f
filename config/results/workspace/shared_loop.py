# tools.results workspace: the fixed shared loop row (row 2): one block applied four times
# (workspace paper Table 3, 0.918M), config/workspace/ws_shared_loop_small.py on tiny Shakespeare bytes; d_ff 786
# matches the workspace row again at block 128: 832,530 parameters.
base = ('../../workspace_small.py', '../../recipe/shakespeare_byte.py')
variant = 'shared_loop'
n_embd = 256
n_head = 8
out_dir = 'out-results/workspace/shared_loop'
d_ff = 786
