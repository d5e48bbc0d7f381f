# tools/results.py battery: the same GPT trained as a BERT-style encoder (causal=False: full attention, the loss at
# the holes only, every sequence holed, each answer span a hole) from the start, its pretraining the masked
# objective, then holes.py as the others: Table 8's "Transformer (bidirectional, non-generative encoder)" column.
base = '../../fon/fon_cpu_battery.py'
out_dir = 'out/results/battery/gpt_bidirectional'
model = 'gpt'
causal = False
p_fill = 1.0
