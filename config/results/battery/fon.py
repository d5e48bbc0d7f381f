# tools.results battery: FON-PC at the battery config's size (config/fon/fon_cpu_battery.py: d 64, L 2, block 96),
# pretrained hole-free on the synthetic battery, then hole fine-tuned by holes.py (FON paper Table 8's FON column).
base = '../../fon/fon_cpu_battery.py'
out_dir = 'out-results/battery/fon'
model = 'fon'
