# tools.results workspace: the anchored conditioned-dense row (row 5), the strongest small-budget control
# (workspace paper Table 3, 0.918M), config/workspace/ws_conditioned_dense_small.py on tiny Shakespeare bytes; d_ff 737
# matches the workspace row again at block 128: 832,225 parameters.
base = ('../../workspace_small.py', '../../recipe/shakespeare_byte.py')
variant = 'conditioned_dense'
out_dir = 'out-results/workspace/conditioned_dense'
d_ff = 737
