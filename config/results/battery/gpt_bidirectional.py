# tools.results battery: gpt.py trained as a BERT-style encoder (causal=False: full attention, the loss at the
# holes only, every sequence holed, each answer span a hole) from the start, its pretraining the masked objective,
# then holes.py as the others: Table 8's "Transformer (bidirectional, non-generative encoder)" column. RoPE: with the
# learned position table the masked objective stayed at the answer tokens' unigram loss (2.54 after 600 iterations,
# every hole answered ' '); with RoPE it left it at once (1.70 after 300).
base = '../../fon/fon_cpu_battery.py'
out_dir = 'out-results/battery/gpt_bidirectional'
model = 'gpt'
pos = 'rope'
causal = False
p_fill = 1.0
