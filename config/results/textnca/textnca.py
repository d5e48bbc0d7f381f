# tools/results.py textnca: config/cpu_textnca.py at block 64, the staged windows (TextNCA paper Table 2's
# schedule comparison; results.py passes --windows for the reversed and uniform rows).
base = '../../cpu_textnca.py'
out_dir = 'out/results/textnca/textnca'
eval_interval = 100
