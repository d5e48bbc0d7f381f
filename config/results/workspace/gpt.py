# tools.results workspace: the plain Transformer row (workspace paper Table 3, row 1) on tiny Shakespeare
# bytes; its shorter position table at block 128 takes 49,152, d_ff 470 (not 506) matches again: 832,344.
base = ('../../workspace/ws_gpt_small.py', '../../recipe/shakespeare_byte.py')
out_dir = 'out-results/workspace/gpt'
d_ff = 470
