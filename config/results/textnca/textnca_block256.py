# tools/results.py textnca at block 256 (TextNCA paper Table 2's schedules): the widest window a quarter of the
# block, as 128 of the paper's 512; 3 x 256 = 12 x 64 tokens per iteration, block 64's budget.
base = '../../cpu_textnca.py'
out_dir = 'out/results/textnca/textnca_block256'
eval_interval = 100
block_size = 256
batch_size = 3
