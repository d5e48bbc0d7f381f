"""FON: Table 2's comparison with Mamba2 and the Transformers at two sizes, the tied head, Sec. 4.3's length
extrapolation, and Table 5's infill arms fine-tuned leg by leg."""
import json
import math
import os
from concurrent.futures import ThreadPoolExecutor

from tools.results.runner import init_source, trained_otherwise
from tools.results.pool import fail
from tools.results.spec import PAPERS, UNIGRAM
from tools.results.stats import TESTS_HEAD, mean_sd, seed_row, tests_cell, verdict, wilson
from tools.results.tables import comparison, first_dir, plt, rates_md, retrained_md, sizes, tokens_seen, write
from tools.results.tune import report_runs


def finetunes(spec, by):
    """Table 5's arms: arm -> [(seed, train.py arguments)], one per seed of the pretraining it starts from
    (by: run -> its table row), at spec['ft_lr'] of that pretraining's own rate."""
    return {name: [(seed, spec['runs'][src] + args + [f"--learning_rate={spec['ft_lr'] * by[src]['lr']:g}",
                                                       f'--init_from={pre}'])
                   for seed, pre in zip(by[src]['seeds'], by[src]['dirs'])]
            for name, (src, args) in spec['finetune'].items()}


def finetune_legs(lab, ft, spec):
    """Table 5's arms: each seed of each arm one constant-rate run trained leg by leg (resumes of one run)
    and read after each leg, lab.jobs runs at once. After the first leg of at least spec['least'] iterations
    at which every seed of every arm in spec['must_pass'] fills above its own LM prior, no further leg.
    ft: arm -> [(seed, train.py arguments with its --init_from)]. Returns ({arm: [(leg, [infill JSON
    per seed])]}, {arm: [seconds per seed]})."""
    legs, iters = spec['legs'], lab.opts.iters
    scale = (lambda n: max(1, n * iters // legs[-1])) if iters else (lambda n: n)
    args = {(name, seed): a for name, runs in ft.items() for seed, a in runs}
    source = {j: init_source(a) for j, a in args.items()}
    for j in args:     # a pretraining retrained at another rate leaves a fine-tune of the old one
        out = lab.run_dir('fon', *j)
        lab.restore(out, args[j])
        how = trained_otherwise(out, args[j])    # before any leg trains: train() would stop at its own
        if how:
            fail(f'{out} was fine-tuned {how}: move it aside to fine-tune it again as asked')
    jobs = sorted(args, key=lambda j: j[0] not in spec['must_pass'])    # the slow revising arms first
    fill = {name: [] for name in ft}
    for leg in map(scale, legs):
        def job(j, leg=leg):
            out, src = lab.run_dir('fon', *j), source[j]
            return lab.train(args[j], out, j[1], 0, upto=leg), lab.eval_json(
                out, 'infill.json', '--infill=True', '--eval_iters=200', f'--baseline_from={src}', leg=leg)
        done = {}
        lab.run_jobs(job, jobs, done)
        for name, runs in ft.items():
            fill[name].append((leg, [done[(name, seed)][1] for seed, _ in runs]))
        secs = {name: [done[(name, seed)][0] for seed, _ in runs] for name, runs in ft.items()}
        if leg >= scale(spec['least']) and all(past_prior(fill[name][-1][1]) for name in spec['must_pass']):
            break
    return fill, secs


def past_prior(reads):
    """Every seed's fill above the LM prior of the pretraining it started from."""
    return all(r['pretrained_prefix_acc'] is not None and r['infill_acc'] > r['pretrained_prefix_acc'] for r in reads)


def fill_cell(accs, holes):
    """A fill rate over seeds: mean +- sd, or one seed's with its Wilson interval over holes."""
    m, sd = mean_sd(accs)
    if len(accs) > 1:
        return f'{100 * m:.1f} +- {100 * sd:.1f}%'
    lo, hi = wilson(m * holes[0], holes[0])
    return f'{100 * m:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]'


def infill_md(fill, must_pass):
    """Table 5 at CPU scale: each arm's fill rate after each leg (mean +- sd over seeds), its LM prior,
    the leg at which every seed passed that prior, and PC against the arm at the last leg."""
    legs = [leg for leg, _ in next(iter(fill.values()))]
    head = (['arm', 'seeds', 'holes per seed'] + [f'fill at {leg} it' for leg in legs] +
            ['its pretraining, holed prefix (the LM prior)', 'passed its prior at', 'same model, un-holed prefix',
             f'PC - arm at {legs[-1]} it', TESTS_HEAD + ' (points)', 'verdict'])
    md = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]

    def last(name):
        return seed_row([r['infill_acc'] for r in fill[name][-1][1]])
    pc = last('FON PC + holes')
    for name, reads in fill.items():
        final = reads[-1][1]
        holes = [r['holes'] for r in final]
        priors = [r['pretrained_prefix_acc'] for r in final]
        prior = fill_cell(priors, holes) if None not in priors else 'n/a'
        passed = next((f'{leg} it' for leg, rs in reads if past_prior(rs)), f'not by {legs[-1]} it')
        vs = (['', '', ''] if name == 'FON PC + holes' else
              [f"{100 * (pc['mean'] - last(name)['mean']):+.1f} points", tests_cell(pc, last(name), 100, 1),
               verdict(pc, last(name), higher=True)])
        cells = ([name, str(len(final)), '/'.join(map(str, holes))] +
                 [fill_cell([r['infill_acc'] for r in rs], holes) for _, rs in reads] +
                 [prior, passed, fill_cell([r['unholed_prefix_acc'] for r in final], holes)] + vs)
        md.append('| ' + ' | '.join(cells) + ' |')
    stop = legs[-1]
    held = all(past_prior(fill[name][-1][1]) for name in must_pass)
    arms = ', '.join(n[len('FON '):-len(' + holes')] for n in must_pass)
    return md + ['', (f"The legs stopped at {stop} iterations: there every seed of {arms} fills above its own LM "
                      "prior." if held else f"At the last leg ({stop} iterations) not every seed of {arms} fills "
                      "above its own LM prior: the fine-tuning stopped at its cap, short of that mark.")]


def fon(lab, seeds):
    """FON at CPU scale: Table 2's comparison with Mamba2 and the Transformers, the tied head, the
    length extrapolation of Sec. 4.3 (the pretrained runs read beyond their training length) and Table 5's
    infill arms, each hole fine-tuned from every seed of its own pretraining and read after every leg.
    results/fon.md holds the pretrainings' tables as soon as they are done, and the infill's once it is."""
    spec = PAPERS['fon']
    rows, curves = report_runs(lab, 'fon', spec, seeds)
    small_rows, _ = report_runs(lab, 'fon-small', spec['small'], seeds)
    by = {r['run']: r for r in rows}    # each run's seeds, at its own rate
    ext_runs = ['FON PC', 'Mamba2', 'GPT learned', 'GPT RoPE', 'GPT ALiBi']
    reads = [(n, out) for n in ext_runs for out in by[n]['dirs']]    # every seed, as the loss tables read
    with ThreadPoolExecutor(lab.jobs) as pool:
        got = list(pool.map(lambda r: lab.eval_json(r[1], 'extrapolate.json', '--extrapolate=True', '--stream=True'),
                            reads))
    ext = {n: [e for (m, _), e in zip(reads, got) if m == n] for n in ext_runs}
    fig = fon_figure(curves, ext)
    md = [f"Headline (FON Table 2 at CPU scale, on this repo's CPU recipe, not the paper's; "
          f"{tokens_seen(first_dir(lab, 'fon', by['FON PC'])):,} tokens each): val loss over the whole stream; at 2/3 the "
          "logged eval-set loss (mean over seeds). 'holds': FON lower by more than two standard deviations.", '',
          *rates_md(rows), '']
    md += comparison(lab, 'fon', rows, curves, 'FON PC', ['FON PC', 'Mamba2', 'GPT RoPE', 'GPT ALiBi']) + ['']
    md += [f"The same four at a second size (d 64, {tokens_seen(first_dir(lab, 'fon-small', small_rows[0])):,} tokens; "
           "config/results/fon/*_small.py), each at its own rate:", '', *rates_md(small_rows), '']
    md += sizes(lab, 'fon', 'FON PC', [(n, n) for n in ('Mamba2', 'GPT RoPE', 'GPT ALiBi')],
                [('fon', rows), ('fon-small', small_rows)], fig.axes[3]) + ['']
    md += ["The tied head (the paper's) against an untied one and against h_0 scaled by sqrt(d), as a Transformer's "
           "tied embedding is (same recipe; 'run lower' means the variant beats the tied FON):", '']
    md += comparison(lab, 'fon', rows, curves, 'FON PC', ['FON PC', 'FON PC untied', 'FON PC, h_0 x sqrt(d)']) + ['']
    md += extrapolation_md(ext) + retrained_md([(f"{n} seed {out.rsplit('-s', 1)[1]}", out) for n, out in reads],
                                               'val loss')
    # the pretrainings' tables now: the infill arms' legs take hours more
    write(lab, 'fon', rows, fig, '\n'.join(md + ['', "The infill arms (Table 5) are still training (the same command "
                                                "resumes them and rewrites this file)."]), seeds)
    ft = finetunes(spec, by)
    fill, secs = finetune_legs(lab, ft, spec)
    ft_rows = []
    for name, runs in ft.items():
        seeds_ft = [seed for seed, _ in runs]
        losses = [lab.evaluate(lab.run_dir('fon', name, seed), '--stream=True')['loss'] for seed in seeds_ft]
        m, sd = mean_sd(losses)
        cfg = json.load(open(os.path.join(lab.run_dir('fon', name, seeds_ft[0]), 'config.json')))
        ft_rows.append({'run': name, 'model': cfg['model'], 'seeds': seeds_ft, 'losses': losses, 'mean': m, 'sd': sd,
                        'seconds': sum(secs[name])})
    fill_axes(fig.axes[2], fill)
    legs = [leg for leg, _ in fill['FON PC + holes']]
    md += ['', f"Infill (Table 5 at CPU scale, each arm over its pretraining's seeds): each arm hole fine-tuned from "
           "every seed of its own pretraining (PC from FON PC; OD and AR from one drafting-only pretraining, which OD "
           "and AR share since neither revises without holes; PC then OD: PC's pretraining fine-tuned with OD's "
           "coupling), all at recursion T1, one run per seed at a constant third of its pretraining's rate (Sec. 7), "
           "read after each leg (stride-8 holes, p 0.15, every val sequence holed, 200 eval batches, the holes drawn "
           "from the run's seed; full-vocabulary argmax at the hole; tools/eval.py --infill). The legs go on until "
           f"every seed of {', '.join(spec['must_pass'])} fills above its own pretraining's LM prior, at least "
           f"{spec['least']} iterations, at most {spec['legs'][-1]} (here: {legs[-1]}); AR and the causal GPT read the "
           "prefix only, so their prior is their ceiling. Fill: mean +- sd over seeds (one seed: [its Wilson 95% "
           "interval over holes]); 'passed its prior at': the first leg at which every seed's fill is above its own "
           "prior. 'holds': PC higher by more than two of the larger sd, Welch p < 0.05 and the bootstrap interval "
           "above 0; 'tie' where none of the three passes, 'run higher' the arm ahead by all three, 'not shown' "
           "naming which pass where they disagree, 'one seed' where a side has no sd.", '']
    md += infill_md(fill, spec['must_pass'])
    md += ['', "Table 8's fill battery, with a BERT-style encoder trained as one (train.py --causal=False) and "
               "future-dependent tasks beyond FON's reach: results/battery.md (python -m tools.results battery)."]
    return rows + ft_rows, fig, '\n'.join(md)


def at_length(es, i, key):
    """One length's reading over a run's seeds (its extrapolate.json each) as a row stats.verdict reads."""
    return seed_row([e['rows'][i][key] for e in es])


def extrapolation_md(ext, ref='FON PC'):
    """Sec. 4.3: each pretraining read at 1, 2, 4 and 8x its training length (mean +- sd over its seeds); at
    the longest, FON's perplexity change against each control's (the paper: ~8-9%, between ALiBi and RoPE)
    and FON's loss against its own at the training length. ext: run -> [extrapolate.json per seed]."""
    rows = ext[ref][0]['rows']
    lengths, last = [r['length'] for r in rows], len(rows) - 1
    md = [f"Length extrapolation (Sec. 4.3; every pretraining's seeds, whole val stream at each length): loss, mean "
          "+- sd over seeds, and the mean change of perplexity against the training length.", '',
          '| run | seeds | ' + ' | '.join(map(str, lengths)) + ' |', '|---|---|' + '---|' * len(lengths)]
    for name, es in ext.items():
        cells = []
        for i in range(len(lengths)):
            loss, pct = at_length(es, i, 'loss'), at_length(es, i, 'delta_pct')
            cells.append(f"{loss['mean']:.3f} +- {loss['sd']:.3f} ({pct['mean']:+.1f}%)"
                         if math.isfinite(loss['mean']) else 'n/a')
        md.append(f'| {name} | {len(es)} | ' + ' | '.join(cells) + ' |')
    x = lengths[-1] // ext[ref][0]['train_length']
    change = {name: at_length(es, last, 'delta_pct') for name, es in ext.items()}
    md += ['', f"At {lengths[-1]} ({x}x): the change of perplexity, {ref} against each control ('holds': {ref}'s "
           "rises less or falls more, by all three tests; 'run lower': the control's does).", '',
           f'| run | change at {x}x | {ref} - run (points) | {TESTS_HEAD} | verdict |', '|---|---|---|---|---|']
    for name, c in change.items():
        if not math.isfinite(c['mean']):
            md.append(f'| {name} | n/a | | | |')
            continue
        vs = ['', '', ''] if name == ref else [f"{change[ref]['mean'] - c['mean']:+.2f}",
                                               tests_cell(change[ref], c, digits=2), verdict(change[ref], c)]
        md.append(f"| {name} | {c['mean']:+.2f} +- {c['sd']:.2f}% | " + ' | '.join(vs) + ' |')
    far, near = at_length(ext[ref], last, 'loss'), at_length(ext[ref], 0, 'loss')
    return md + ['', f"{ref} at {lengths[-1]} against itself at {lengths[0]}: {far['mean']:.3f} +- {far['sd']:.3f} "
                 f"against {near['mean']:.3f} +- {near['sd']:.3f}, {tests_cell(far, near)}: "
                 f"{verdict(far, near).replace('run lower', f'lower at {lengths[0]}')} ('holds': lower at {x}x)."]


def fon_figure(curves, ext):
    """The pretraining curves and the loss against the eval length; the third panel waits for the infill
    legs (fill_axes), the fourth for the gaps at two sizes (sizes)."""
    fig, (ax1, ax2, ax3, _) = plt.subplots(1, 4, figsize=(20, 4))
    for i, name in enumerate(ext):
        ax1.plot(*zip(*curves[name][0]), 'o-', color=f'C{i}', ms=3, lw=1, label=name)
    ax1.axhline(UNIGRAM, color='gray', ls=':', label=f'unigram {UNIGRAM:.2f}')
    ax1.set(title='pretraining, val loss (eval set)', xlabel='iteration', ylabel='nats / char')
    for i, (name, es) in enumerate(ext.items()):
        reads = [at_length(es, j, 'loss') for j in range(len(es[0]['rows']))]
        ax2.errorbar([r['length'] for r in es[0]['rows']], [r['mean'] for r in reads], [r['sd'] for r in reads],
                     fmt='o-', color=f'C{i}', capsize=3, label=name)
    ax2.set_xscale('log', base=2)
    ax2.set(title=f"length extrapolation (trained at {es[0]['train_length']}; whole val stream; sd over seeds)",
            xlabel='eval length', ylabel='nats / char', ylim=(1, 4))
    ax3.text(0.5, 0.5, 'infill arms still training', ha='center', va='center', transform=ax3.transAxes)
    ax3.set_axis_off()
    for ax in (ax1, ax2):
        ax.legend(fontsize=8)
    return fig


def fill_axes(ax, fill):
    """The fill rate over the hole fine-tuning legs, mean +- sd over seeds, each arm's LM prior dotted."""
    ax.texts[0].remove()
    ax.set_axis_on()
    for i, (name, reads) in enumerate(fill.items()):
        stats = [mean_sd([100 * r['infill_acc'] for r in rs]) for _, rs in reads]
        ax.errorbar([leg for leg, _ in reads], [m for m, _ in stats],
                    yerr=[0 if math.isnan(sd) else sd for _, sd in stats], fmt='o-', color=f'C{i}', capsize=2,
                    label=name.replace(' + holes', ''))
        priors = [r['pretrained_prefix_acc'] for r in reads[-1][1]]
        if None not in priors:
            ax.axhline(100 * sum(priors) / len(priors), color=f'C{i}', ls=':', lw=1)
    ax.set(title='infill: argmax accuracy at the holes, mean +- sd over seeds\n(dotted: the LM prior from the prefix)',
           xlabel='hole fine-tuning iteration', ylabel='%', ylim=(0, 80))
    ax.legend(fontsize=8)
