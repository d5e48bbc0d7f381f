# tools.results workspace: the adaptive-exit mixture row (row 3): the shared loop, an affine router on e mixing the four exits
# (workspace paper Table 3, 0.918M), config/workspace/ws_adaptive_exit_small.py on tiny Shakespeare bytes; d_ff 784
# matches the workspace row again at block 128: 832,532 parameters.
base = ('../../workspace_small.py', '../../recipe/shakespeare_byte.py')
variant = 'adaptive_exit'
n_embd = 256
n_head = 8
out_dir = 'out-results/workspace/adaptive_exit'
d_ff = 784
