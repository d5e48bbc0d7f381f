# The depth task's Hier-TextNCA with Table 5's residual gate (h + u, no update gate): the GRU's state
# saturated under the answer-only loss (ln 26 at one hop, a guess over every letter, at every rate),
# and the residual gate is the paper's own ablation without a gate to saturate. Otherwise textnca.py's
# model: three stages of the GPT 3L's width, windows (2, 8, 32), Ts = 2 in training.
base = 'textnca.py'
out_dir = 'out-results/depth/textnca_residual'
gate = 'residual'
