"""What every paper's report is made of: a run's parameter and FLOP counts, comparison tables with their
verdicts, the rate brackets, the gaps at two sizes, and the files results/<paper>.md, .json and .png."""
import json
import math
import os

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402,F401  (the experiments' figures)
import matplotlib.ticker  # noqa: E402
from PIL import Image  # noqa: E402  (matplotlib's own dependency)
import torch  # noqa: E402

from models import build_model  # noqa: E402
from tools.report import replace_with, write_text  # noqa: E402
from tools.results.spec import PAPERS  # noqa: E402
from tools.results.stats import TESTS_HEAD, no_gap, seed_row, seeds_of, tests_cell, verdict, verdict_p  # noqa: E402


def counts(out):
    """(parameters as the papers count them: a tied matrix twice; non-embedding; FLOPs per token at
    block_size) of a run, built on the meta device from its config.json."""
    cfg = json.load(open(os.path.join(out, 'config.json')))
    with torch.device('meta'):
        m = build_model(cfg['model'], cfg)
    emb = sum(mod.weight.numel() for mod in m.modules() if isinstance(mod, torch.nn.Embedding))
    paper = sum(p.numel() for _, p in m.named_parameters(remove_duplicate=False))
    return paper, m.num_params() - emb, m.flops_per_token(cfg['block_size'])


def tokens_seen(out):
    cfg = json.load(open(os.path.join(out, 'config.json')))
    return cfg['batch_size'] * cfg['gradient_accumulation_steps'] * cfg['block_size'] * cfg['max_iters']


def at_fraction(curve, frac=2 / 3):
    """The logged eval-set loss at the eval nearest frac of the run: (iteration, loss)."""
    last = curve[-1][0]
    return min(curve, key=lambda p: abs(p[0] - frac * last))


def first_dir(lab, paper, row):
    """The folder of a row's first seed (a tuned run's at its rate)."""
    return row['dirs'][0] if 'dirs' in row else lab.run_dir(paper, row['run'], row['seeds'][0])


def comparison(lab, paper, rows, curves, ref, names, paper_col=None, scale=1.0):
    """One table of runs against ref: each run's counts, its loss (mean +- sd over its seeds) at the
    end and at 2/3 of the run (the eval-set estimate the log holds, mean over seeds), ref's gap to
    it, Welch's test and the bootstrap interval of that gap, and the verdict (stats.verdict: 'holds' where
    the two-sd rule, Welch's p and the interval all show ref lower). paper_col: the paper's number
    per run name, shown beside ours. scale: the logged losses (nats) into the rows' unit."""
    by = {r['run']: r for r in rows}
    head = ['run', 'params, paper convention (tied matrix twice)', 'non-embedding', 'FLOPs/token', 'seeds',
            'val loss', 'at 2/3', f'{ref} - run', TESTS_HEAD, 'verdict'] + (['paper'] if paper_col else [])
    md = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
    for name in names:
        r, q = by[name], by[ref]
        pc, non_emb, fpt = counts(first_dir(lab, paper, r))
        pts = [at_fraction(c) for c in curves[name]]
        gap = q['mean'] - r['mean']
        sd_txt = '' if math.isnan(r['sd']) else f" +- {r['sd']:.3f}"
        md.append(f"| {name} | {pc:,} | {non_emb:,} | {fpt / 1e6:.2f}M | {len(r['losses'])} | {r['mean']:.3f}{sd_txt} | "
                  f"{scale * sum(l for _, l in pts) / len(pts):.3f} (iter {pts[0][0]}) | "
                  f"{'' if name == ref else f'{gap:+.3f}'} | {'' if name == ref else tests_cell(q, r)} | "
                  f"{'' if name == ref else verdict_cell(q, r)} |" +
                  (f" {paper_col.get(name, '')} |" if paper_col else ''))
    return md


def verdict_cell(q, r):
    """verdict(q, r), and the verdict again with each seed's value at the rate its other seeds choose
    (tune.report_runs' 'off_seed'; a row whose rate no seed chose keeps its values) where the two differ."""
    sides = [x['off_seed']['losses'] if 'off_seed' in x else seeds_of(x) for x in (q, r)]
    v = verdict(q, r)
    if None in sides:
        return v + "; with each seed's rate chosen on the other seeds: not trained"
    a, b = seed_row(sides[0]), seed_row(sides[1])
    w = verdict(a, b)
    return v if w == v else f"{v}; with each seed's rate chosen on the other seeds: {verdict_p(a, b)}"


def rates_md(rows, unit='val loss'):
    """The rate brackets of a paper's tuned runs, one line each, and the rate every other tuned row took."""
    md = [f"Each run's own rate (its first seed's {unit} at each rate of its bracket, the best inside the grid "
          f"or at its widest, 7 rates; then the mean over every seed at the grid's best two, the lower taken): " + '; '.join(
              f"{r['run']}: " + ', '.join(f'{lr} {v:.3f}' for lr, v in r['grid'].items()) + '; mean ' +
              ', '.join(f'{lr} {v:.3f}' for lr, v in r['finals'].items()) + f" -> {r['lr']:g}"
              for r in rows if 'grid' in r) + '.']
    moved = [r for r in rows if 'grid' in r and 'off_seed' in r and set(r['off_seed']['lrs']) != {f"{r['lr']:g}"}]
    if moved:
        md[0] += ' Each seed at the rate its other seeds choose (their mean over the two): ' + '; '.join(
            f"{r['run']} {', '.join(r['off_seed']['lrs'])} (mean {seed_row(r['off_seed']['losses'])['mean']:.3f})"
            for r in moved) + '; every other run at its rate.'
    elif any('off_seed' in r for r in rows):
        md[0] += ' The other seeds choose the same rate for each seed.'
    shared = [r for r in rows if 'lr' in r and 'grid' not in r]
    if shared:
        md[0] += ' At their model\'s rate: ' + ', '.join(f"{r['run']} {r['lr']:g}" for r in shared) + '.'
    return md


def sizes(lab, paper, ref, pairs, both, ax, unit='val loss'):
    """The headline gaps at both sizes: both = [(folder, rows), ...] (the paper's runs, then its small
    size's under out-results/<folder>/), pairs = [(name at the first size, name at the second)]; a
    table row per pair and size (non-embedding parameters, FLOPs per token and tokens per parameter of
    ref and of the run, ref's gap to the run with two of the larger sd, Welch's test and the bootstrap
    interval, the verdict), the pairs not decidable at this scale, and on ax the gap against ref's tokens
    per parameter."""
    md = [f'| {ref} against | non-embedding params ({ref} / run) | FLOPs/token | tokens per param | '
          f'{unit} gap ({ref} - run, +- two sd) | {TESTS_HEAD} | verdict |', '|---|---|---|---|---|---|---|']
    for i, pair in enumerate(pairs):
        pts = []
        for (folder, rows), name in zip(both, pair):
            by = {r['run']: r for r in rows}
            r, q = by[name], by[ref]
            dq, dr = first_dir(lab, folder, q), first_dir(lab, folder, r)
            (_, emb_q, fl_q), (_, emb_r, fl_r) = counts(dq), counts(dr)
            tpp_q, tpp_r = tokens_seen(dq) / emb_q, tokens_seen(dr) / emb_r
            two_sd = 2 * max(r['sd'], q['sd'])
            pts.append((tpp_q, q['mean'] - r['mean'], two_sd))
            md.append(f"| {name} | {emb_q:,} / {emb_r:,} | {fl_q / 1e6:.2f}M / {fl_r / 1e6:.2f}M | "
                      f"{tpp_q:.1f} / {tpp_r:.1f} | {q['mean'] - r['mean']:+.3f} +- {two_sd:.3f} | "
                      f"{tests_cell(q, r)} | {verdict_cell(q, r)} |")
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts], marker='o', capsize=3,
                    color=f'C{i}', label=pair[-1])
    ax.axhline(0, color='k', lw=0.5)
    ax.set(title=f'{ref} - run (two sd)', xlabel=f'tokens per non-embedding parameter of {ref}',
           ylabel=f'{unit} gap (< 0: {ref} lower)', xscale='log')
    ax.set_xticks([p[0] for p in pts], [f'{p[0]:.1f}' for p in pts], minor=False)    # the two sizes, no minor labels
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.legend(fontsize=8)
    return md + ['', *undecided_md(ref, pairs, both)]


def undecided_md(ref, pairs, both):
    """The line under sizes()' table: the pairs whose gap is not shown at either size."""
    ties = [pair[-1] for pair in pairs
            if all(no_gap(verdict({r['run']: r for r in rows}[ref], {r['run']: r for r in rows}[name]))
                   for (_, rows), name in zip(both, pair))]
    return [f"Not decidable at this scale (no gap shown at either size): {ref} against {', '.join(ties)}." if ties
            else "Every gap is shown at one size at least."]


def retrained_md(runs, measure):
    """A line naming the runs [(label, folder)] whose readings read a checkpoint trained again from a record that
    it did not reproduce (runner.ensure_ckpt's eval/retrain.json), with the last eval's measure of each; [] where
    none did."""
    named = []
    for label, out in runs:
        path = os.path.join(out, 'eval', 'retrain.json')
        if os.path.isfile(path):
            r = json.load(open(path))
            named.append(f"{label} ({measure} {r['retrained'][-1][1]:.4f} against the record's "
                         f"{r['record'][-1][1]:.4f})")
    return ['', "Read from a checkpoint trained again from its record that ended elsewhere than the record (another "
                "CPU's or build's rounding; its curve and the readings its record holds are the record's, the readings "
                "taken since these weights'): " + '; '.join(named) + '.'] if named else []


def write(lab, paper, rows, fig, extra, seeds):
    # results/ holds the full runs' tables; a quick --iters look writes beside its runs
    iters = lab.opts.iters
    dest = lab.opts.results if not iters else os.path.join(lab.opts.out, f'{paper}-iters{iters}')
    os.makedirs(dest, exist_ok=True)
    fig.tight_layout()
    png = os.path.join(dest, f'{paper}.png')

    def save_png(tmp):
        fig.savefig(tmp, dpi=80, format='png')
        Image.open(tmp).convert('RGB').quantize(256).save(tmp, format='png', optimize=True)   # a palette: a third of the bytes
    replace_with(png, save_png)
    lines = [f"# {paper}: {PAPERS[paper]['claim']}", '',
             f"{PAPERS[paper].get('data', 'Tiny Shakespeare characters')}, whole validation stream (tools/eval.py "
             f"--stream=True), seeds {', '.join(map(str, rows[0].get('seeds', []))) if rows else 'none recorded yet'} (the per-seed "
             f"column lists each run's, in that order). Command: "
             f"`python -m tools.results {paper}`; each run's record (config, command, readings, val curve): "
             f"results/runs/{paper}.jsonl.", '']
    if rows:
        lines += [f"| run | model | {PAPERS[paper].get('metric', 'val loss')} (mean +- sd) | per seed | train wall time |",
                  '|---|---|---|---|---|']
    for r in rows:
        sd = '' if math.isnan(r['sd']) else f" +- {r['sd']:.3f}"
        lines.append(f"| {r['run']} | {r['model']} | {r['mean']:.3f}{sd} | "
                     f"{', '.join(f'{x:.3f}' for x in r['losses'])} | {r['seconds'] / 60:.1f} min |")
    lines += ['', extra, '']
    write_text(os.path.join(dest, f'{paper}.md'), '\n'.join(lines))
    write_text(os.path.join(dest, f'{paper}.json'), json.dumps(rows, indent=1))
    print('\n'.join(lines))
