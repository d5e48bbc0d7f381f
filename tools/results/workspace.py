"""The workspace's Table 3: six rows at matched parameters, each at its own rate, at two sizes, in bits per
byte."""
import math

from tools.results.spec import PAPERS
from tools.results.tables import comparison, counts, first_dir, plt, rates_md, sizes, tokens_seen
from tools.results.tune import report_runs


def workspace(lab, seeds):
    """Table 3's six rows, each at its own rate, over the paper's seeds; again at a second size
    (spec['small']: 21-24 bytes per non-embedding parameter), and the workspace's gap to each control at
    both sizes against tokens per parameter."""
    spec = PAPERS['workspace']
    rows, curves = report_runs(lab, 'workspace', spec, seeds, metric='bits_per_byte')
    small_rows, _ = report_runs(lab, 'workspace-small', spec['small'], seeds, metric='bits_per_byte')
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(17, 4))
    for i, (name, runs) in enumerate(curves.items()):
        for j, c in enumerate(runs):
            if c:
                ax1.plot([x for x, _ in c if x > 0], [y / math.log(2) for x, y in c if x > 0], '-', color=f'C{i}',
                         lw=1, label=name if j == 0 else None)
    ax1.set(title='tiny Shakespeare bytes, val (eval set), each seed', xlabel='iteration', ylabel='bits / byte')
    ax1.legend(fontsize=8)
    for i, r in enumerate(rows):
        ax2.plot([i] * len(r['losses']), r['losses'], 'o', color=f'C{i}')
        ax2.errorbar(i + 0.15, r['mean'], yerr=0 if math.isnan(r['sd']) else r['sd'], fmt='s', color=f'C{i}', capsize=4)
    ax2.set_xticks(range(len(rows)), [r['run'].replace(' ', '\n', 1) for r in rows], fontsize=7)
    ax2.set(title='whole val stream: each seed, mean +- sd', ylabel='bits / byte')
    out = lab.run_dir('workspace', 'workspace', rows[-1]['seeds'][0])
    md = [f"Recipe: the repo's CPU recipe (AdamW at each run's own rate below, cosine to a tenth of it, warmup 100, "
          f"batch 8 x 128, {tokens_seen(out):,} bytes), not the paper's. Seeds {', '.join(map(str, rows[0]['seeds']))} (the "
          "paper's labels). 'holds': the workspace lower by more than two standard deviations; at 2/3 beside the "
          "end shows whether the ranking has settled.", '', *rates_md(rows, 'bits per byte'), '']
    md += comparison(lab, 'workspace', rows, curves, 'workspace', list(spec['runs']), scale=1 / math.log(2))
    small = first_dir(lab, 'workspace-small', small_rows[-1])
    md += ['', f"The six rows at a second size (3/8 of the width with the first size's head counts: d 48 / 96 / 84, "
               f"heads 12 wide, slots of m = 12; the workspace {counts(small)[0]:,} parameters, each row's d_ff the "
               f"nearest its count; {tokens_seen(small):,} bytes; config/results/workspace/*_small.py), each at its "
               "own rate:", '', *rates_md(small_rows, 'bits per byte'), '']
    pairs = [(n, n) for n in spec['runs'] if n != 'workspace']
    both = [('workspace', rows), ('workspace-small', small_rows)]
    md += sizes(lab, 'workspace', 'workspace', pairs, both, ax3, unit='bits per byte')
    return rows, fig, '\n'.join(md)
