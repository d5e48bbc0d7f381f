# tools.results workspace: the anchored shared loop row (workspace paper Table 3, row 4: 0.918M; 832,455 at
# block 128), config/workspace/ws_anchored_small.py on tiny Shakespeare bytes.
base = ('../../workspace_small.py', '../../recipe/shakespeare_byte.py')
out_dir = 'out-results/workspace/anchored'
variant = 'anchored'
d_ff = 743
