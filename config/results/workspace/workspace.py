# tools.results workspace: the causal workspace row (workspace paper Table 3, 0.918M; 832,427 at block 128)
# on tiny Shakespeare bytes.
base = ('../../workspace_small.py', '../../recipe/shakespeare_byte.py')
out_dir = 'out-results/workspace/workspace'
