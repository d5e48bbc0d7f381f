# tools.results textnca: config/cpu_textnca.py at the flagship's Ts = 4 with the paper's windows (8, 32, 128)
# over block 512 scaled by 1/4: windows (2, 8, 32) over block 128. The receptive field 1 + 4 (1 + 7 + 31) = 157
# exceeds the block only in stage 3, as the paper's 661 exceeds 512 (Sec. 3.2). 6 x 128 = 12 x 64 tokens per
# iteration, the demo's budget. the lab passes --windows for the schedule rows and --Ts for the Ts sweep.
base = '../../cpu_textnca.py'
out_dir = 'out-results/textnca/textnca'
eval_interval = 100
block_size = 128
batch_size = 6
windows = (2, 8, 32)
Ts = 4
