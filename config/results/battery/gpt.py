# tools.results battery: the GPT of the battery config (d 64, L 2, 4 heads) with RoPE, trained causally, pretrained
# hole-free, then hole fine-tuned by holes.py: Table 8's "Transformer (causal)" column (fill at MASK, read causally)
# and the causal GPT's generation reading. RoPE, not the config's learned table, as gpt_bidirectional.py needs it.
base = '../../fon/fon_cpu_battery.py'
out_dir = 'out-results/battery/gpt'
model = 'gpt'
pos = 'rope'
