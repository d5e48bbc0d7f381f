# tools.results battery: Mamba2 (baselines.Mamba2) at the battery config's size (d 64, L 2, its own defaults
# otherwise), pretrained hole-free, then hole fine-tuned by holes.py: Table 8's Mamba2 column (causal fill).
base = '../../fon/fon_cpu_battery.py'
out_dir = 'out-results/battery/mamba2'
model = 'mamba2'
