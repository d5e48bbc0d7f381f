"""FON's Table 8 on the synthetic battery: fill and generation per task with Wilson intervals against
chance, and Table 5's arms on ind_r and mem_r."""
import json
import math
import os

from tools.results.spec import BATTERY_N, PAPERS
from tools.results.stats import TESTS_HEAD, mean_sd, seed_row, tests_cell, verdict, verdict_p, wilson
from tools.results.tables import plt


def battery(lab, seeds):
    """FON's Table 8 at CPU scale: FON PC, a causal GPT, a GPT trained as a bidirectional encoder
    (train.py causal=False: full attention and the loss at the holes from its first step) and Mamba2,
    each d 64, L 2, pretrained 400 iterations on the synthetic battery and hole fine-tuned 2000
    (every answer span a hole). Each is then read on every task's BATTERY_N val examples: fill (the
    answer at MASK: FON through its holes, the bidirectional GPT with full attention, the causal models
    causally) and the causal GPT's greedy generation, exact match with Wilson 95% intervals against
    chance, each task's counts pooled over seeds. Table 5's arms beside them: FON OD (from a
    drafting-only pretraining) and FON PC then OD (PC's pretraining, OD's coupling) against FON PC on
    ind_r and mem_r, mean +- sd over seeds. Seeds: 3 (1337, 1338, 1339); --seeds=1 is the quick look.

        python prepare_data.py synthetic && python -m tools.results battery"""
    spec = PAPERS['battery']
    slow = ('Mamba2 + holes', 'FON PC + holes', 'FON OD + holes', 'FON PC then OD + holes')   # first: two run at once
    chains = sorted(spec['finetune'], key=lambda f: slow.index(f) if f in slow else len(slow))
    seeds = range(1337, 1337 + seeds)
    # the pretrainings first: two chains start from FON PC, and one run must not train in two processes
    lab.run_jobs(lambda j: lab.train(spec['runs'][j[0]], lab.run_dir('battery', *j), j[1]),
             [(name, seed) for name in spec['runs'] for seed in seeds], {})
    done = {}
    lab.run_jobs(lambda j: battery_chain(lab, *j), [(ft, seed) for ft in chains for seed in seeds], done)
    rows = battery_rows(lab, done, seeds)
    counts = BatteryCounts(done, done[(chains[0], 1337)][2]['tasks'], seeds)
    md = battery_table_md(counts, seeds) + battery_arms_md(done, seeds) + battery_claim_md(counts)
    return rows, battery_figure(counts), '\n'.join(md)


def battery_chain(lab, ft, seed):
    """One model's chain: pretrain, hole fine-tune from it, score both on the val stream, read the
    battery. Returns ((seconds), (losses), the battery JSON), pretraining first."""
    spec = PAPERS['battery']
    src, extra = spec['finetune'][ft]
    pre, out = lab.run_dir('battery', src, seed), lab.run_dir('battery', ft, seed)
    secs = (lab.train(spec['runs'][src], pre, seed),
            lab.train(spec['runs'][src] + extra + [f'--init_from={pre}'], out, seed))
    losses = (lab.evaluate(pre, '--stream=True')['loss'], lab.evaluate(out, '--stream=True')['loss'])
    return secs, losses, lab.eval_json(out, 'battery.json', '--battery=True', f'--battery_n={BATTERY_N}')


def battery_rows(lab, done, seeds):
    """The top table: the pretrained runs, then the fine-tuned ones, mean +- sd over seeds."""
    spec, rows = PAPERS['battery'], []
    for phase, names in ((0, list(spec['runs'])), (1, list(spec['finetune']))):
        for name in names:    # a pretraining's numbers come with the first chain that starts from it
            ft = name if phase else next(f for f, (src, _) in spec['finetune'].items() if src == name)
            cfg = json.load(open(os.path.join(lab.run_dir('battery', name, 1337), 'config.json')))
            losses = [done[(ft, s)][1][phase] for s in seeds]
            m, sd = mean_sd(losses)
            rows.append({'run': name, 'model': cfg['model'] + ('' if cfg.get('causal', True) else ', causal=False'),
                         'seeds': list(seeds), 'losses': losses, 'mean': m, 'sd': sd,
                         'seconds': sum(done[(ft, s)][0][phase] for s in seeds)})
    return rows


class BatteryCounts:
    """Every reading's exact-match count over each task's examples, pooled over seeds: right[label, t]
    of n[label, t], for each task t and each group of tasks. cols: (label, the fine-tuned run, its
    reading in battery.json)."""
    cols = [('FON PC fill', 'FON PC + holes', 'fill'), ('GPT causal fill', 'GPT causal + holes', 'fill'),
            ('GPT bidirectional fill', 'GPT bidirectional (causal=False) + holes', 'fill_bidirectional'),
            ('Mamba2 fill', 'Mamba2 + holes', 'fill'), ('GPT causal generate', 'GPT causal + holes', 'generate')]

    def __init__(self, done, tasks, seeds):
        from battery import FAR, NEAR
        self.tasks, self.right, self.n, self.per_seed = tasks, {}, {}, {}
        for label, ft, reading in self.cols:
            for t in tasks:
                got = [done[(ft, s)][2]['tasks'][t] for s in seeds]
                got = [(r[reading], r['n']) for r in got if r.get(reading) is not None]
                self.right[label, t], self.n[label, t] = sum(round(x * k) for x, k in got), sum(k for _, k in got)
                self.per_seed[label, t] = [x for x, _ in got]
        self.groups = (('Table 8 six', [t for t in tasks if not tasks[t]['future']]),
                       ('future-dependent five', [t for t in tasks if t in NEAR]),
                       ("far five (evidence beyond FON's reach)", [t for t in tasks if t in FAR]))
        for gname, ts in self.groups:      # a group: its tasks' examples pooled
            for label, _, _ in self.cols:
                self.right[label, gname] = sum(self.right[label, t] for t in ts)
                self.n[label, gname] = sum(self.n[label, t] for t in ts)

    def rate(self, label, t):
        return self.right[label, t] / self.n[label, t] if self.n[label, t] else float('nan')

    def interval(self, label, t):
        return wilson(self.right[label, t], self.n[label, t])

    def cell(self, label, t):
        lo, hi = self.interval(label, t)
        return f'{self.rate(label, t):.3f} [{lo:.3f}, {hi:.3f}]' if self.n[label, t] else 'n/a'

    def above(self, a, b, t):      # a difference: the two intervals do not overlap
        return self.n[a, t] > 0 and self.n[b, t] > 0 and self.interval(a, t)[0] > self.interval(b, t)[1]

    def at_chance(self, a, t):     # chance inside the interval, or the rate below it
        lo, hi = self.interval(a, t)
        return self.n[a, t] > 0 and (lo <= self.tasks[t]['chance'] <= hi or self.rate(a, t) <= self.tasks[t]['chance'])


def battery_table_md(c, seeds):
    """The per-task table: every reading's exact match with its interval, per task and pooled per group."""
    from battery import FAR
    tasks, cols = c.tasks, c.cols
    sizes = '/'.join(map(str, sorted({tasks[t]['n'] for t in tasks})))
    pooled = f' and seed, {len(seeds)} seeds pooled' if len(seeds) > 1 else ', seed 1337'
    md = [f"Per task (tools/eval.py --battery --battery_n={BATTERY_N}: the hole fine-tuned runs on the synthetic val "
          f"split's examples, {sizes} per task{pooled}): exact match of the whole answer, [its Wilson 95% interval]. "
          "Fill: the answer's tokens at the MASK id, argmax at each (FON through its holes; the bidirectional GPT "
          "with full attention; the causal GPT and Mamba2 causally, at the MASK positions). Generate: greedy after the "
          "prompt, the suffix unseen; the bidirectional GPT is not a generator and has no generate reading. Chance: a "
          "uniform guess among the answers the task's format allows.", '',
          '| task | chance | n | ' + ' | '.join(label for label, _, _ in cols) + ' |',
          '|---|---|---|' + '---|' * len(cols)]
    for t, row in tasks.items():
        name = f'{t} (future, far)' if t in FAR else f'{t} (future)' if row['future'] else t
        md.append(f"| {name} | {row['chance']:.3f} | {c.n[cols[0][0], t]} | " +
                  ' | '.join(c.cell(label, t) for label, _, _ in cols) + ' |')
    for gname, ts in c.groups:
        md.append(f"| {gname}, pooled | {sum(tasks[t]['chance'] for t in ts) / len(ts):.3f} | {c.n[cols[0][0], gname]} | "
                  + ' | '.join(c.cell(label, gname) for label, _, _ in cols) + ' |')
    if len(seeds) > 1:
        md += ['', 'Per seed, fill (FON PC / GPT causal / GPT bidirectional / Mamba2): ' + '; '.join(
            f"{t} " + ' / '.join(','.join(f'{x:.2f}' for x in c.per_seed[label, t]) for label, _, _ in cols[:4])
            for t in tasks) + '.']
    return md


def battery_arms_md(done, seeds):
    """Table 5's arms on the battery: each arm's fill exact match on spec['arm_tasks'], mean +- sd over
    seeds, and PC against it by the two-sd rule."""
    spec = PAPERS['battery']
    chance = {t: done[(spec['arms'][0], seeds[0])][2]['tasks'][t]['chance'] for t in spec['arm_tasks']}
    head = ['arm', 'seeds'] + [c for t in spec['arm_tasks'] for c in (f'{t} fill (chance {chance[t]:.3f})',
                                                                       'per seed', 'PC - arm', TESTS_HEAD, 'verdict')]
    md = ['', f"Table 5's arms on the battery (each hole fine-tuned from its own pretraining, as on text: OD from a "
          "drafting-only one, PC then OD from PC's with OD's coupling): fill exact match on "
          f"{' and '.join(spec['arm_tasks'])}, the tasks where FON's fill left the causal readers' chance; mean +- sd "
          "over seeds. 'holds': PC higher by more than two of the larger sd, Welch p < 0.05 and the bootstrap interval "
          "above 0; 'tie' where none of the three passes, 'run higher' the arm ahead by all three, 'not shown' naming "
          "which pass where they disagree, 'one seed' where a side has no sd.", '',
          '| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]

    def stat(arm, t):
        return seed_row([done[(arm, s)][2]['tasks'][t]['fill'] for s in seeds])
    for arm in spec['arms']:
        cells = [arm, str(len(seeds))]
        for t in spec['arm_tasks']:
            r, pc = stat(arm, t), stat(spec['arms'][0], t)
            cells += [f"{r['mean']:.3f}" + ('' if math.isnan(r['sd']) else f" +- {r['sd']:.3f}"),
                      ', '.join(f'{x:.3f}' for x in r['xs'])]
            cells += (['', '', ''] if arm == spec['arms'][0] else
                      [f"{pc['mean'] - r['mean']:+.3f}", tests_cell(pc, r), verdict(pc, r, higher=True)])
        md.append('| ' + ' | '.join(cells) + ' |')
    return md


def over_seeds(c, t):
    """FON PC's fill on task t against the causal GPT's, seed by seed: the verdict and Welch's p."""
    fon, gpt = seed_row(c.per_seed['FON PC fill', t]), seed_row(c.per_seed['GPT causal fill', t])
    return f"{t} {verdict_p(fon, gpt, higher=True)}"


def battery_claim_md(c):
    """The claim, part by part, counted from the intervals."""
    tasks, above, at_chance = c.tasks, c.above, c.at_chance
    six, near, far = (ts for _, ts in c.groups)
    fills = [label for label, _, _ in c.cols[:4]]
    bi = 'GPT bidirectional fill'
    beaten = [t for t in tasks if any(above(f, bi, t) for f in fills)]
    top = sum(all(above(bi, f, t) for f in fills if f != bi) for t in tasks)
    pooled = [t for t in six + near + far if above('FON PC fill', 'GPT causal fill', t)]
    return ['', 'The claim, part by part (a difference: the two intervals do not overlap; at chance: chance inside the '
            'interval, or the rate below chance):', '',
            f"- FON fills where the causal Transformer fails: FON PC's fill above the causal GPT's on "
            f"{sum(above('FON PC fill', 'GPT causal fill', t) for t in six)} of 6 Table 8 tasks, "
            f"{sum(above('FON PC fill', 'GPT causal fill', t) for t in near)} of the 5 future-dependent ones and "
            f"{sum(above('FON PC fill', 'GPT causal fill', t) for t in far)} of their 5 far variants; below it on "
            f"{sum(above('GPT causal fill', 'FON PC fill', t) for t in tasks)} of {len(tasks)}."
            + (" Over seeds, where the pooled intervals differ (each seed's fill, FON PC against the causal GPT, the "
               "three-part rule): " + '; '.join(over_seeds(c, t) for t in pooled) + '.' if pooled else ''),
            f"- The bidirectional encoder is the fill ceiling: no model's fill above the bidirectional GPT's on "
            f"{len(tasks) - len(beaten)} of {len(tasks)} tasks"
            + (f" (above it on {', '.join(beaten)})" if beaten else '')
            + f"; the bidirectional GPT above every other model on {top}.",
            f"- On future-dependent tasks a causal reader is at chance: the causal GPT's fill on "
            f"{sum(at_chance('GPT causal fill', t) for t in near + far)} of 10, its generation on "
            f"{sum(at_chance('GPT causal generate', t) for t in near + far)} of 10, Mamba2's fill on "
            f"{sum(at_chance('Mamba2 fill', t) for t in near + far)} of 10.",
            f"- Beyond FON's reach (the far five: evidence 33-49 characters after the answer, FON's revision sees 30 "
            f"positions past a hole): FON PC at chance on {sum(at_chance('FON PC fill', t) for t in far)} of 5 far and "
            f"{sum(at_chance('FON PC fill', t) for t in near)} of 5 near; the bidirectional GPT above chance on "
            f"{sum(not at_chance(bi, t) for t in far)} of 5 far and "
            f"{sum(not at_chance(bi, t) for t in near)} of 5 near.",
            '', "Top table: each run's val loss over the whole synthetic val stream (tools/eval.py --stream=True), the "
            "next-token loss for the causal models; for the bidirectional GPT the loss at its holes, every block holed "
            "as training holes it (each answer span; stride-8 self-holing in a block without one), full attention. The "
            "pretraining runs are hole-free but the bidirectional GPT's, whose pretraining is that masked objective. "
            "Runs: config/results/battery/*.py; two chains train at once, one thread each."]


def battery_figure(c):
    """Every reading's exact match with its interval against chance, per task and pooled per group."""
    tasks, cols, groups = c.tasks, c.cols, c.groups
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 4.5), gridspec_kw={'width_ratios': [3, 1]})
    names, w = list(tasks), 0.8 / len(cols)
    for j, (label, _, _) in enumerate(cols):
        for ax, keys in ((ax1, names), (ax2, [g for g, _ in groups])):
            ys = [c.rate(label, t) for t in keys]
            ci = [c.interval(label, t) for t in keys]
            err = [[max(0.0, y - lo) for y, (lo, _) in zip(ys, ci)], [max(0.0, hi - y) for y, (_, hi) in zip(ys, ci)]]
            gen = 'generate' in label
            ax.bar([i + (j - (len(cols) - 1) / 2) * w for i in range(len(keys))], ys, w, yerr=err, capsize=1.5,
                   label=label, color=f'C{j}', hatch='//' if gen else None, alpha=0.6 if gen else 1.0)
    ax1.plot(range(len(names)), [tasks[t]['chance'] for t in names], 'k_', ms=12, mew=2, label='chance')
    ax1.set_xticks(range(len(names)), names, rotation=45, ha='right', fontsize=8)
    ax1.set(title='synthetic battery after hole fine-tuning: exact match, Wilson 95%', ylabel='exact match',
            ylim=(0, 1.05))
    ax1.legend(fontsize=7, ncol=3)
    ax2.plot(range(len(groups)), [sum(tasks[t]['chance'] for t in ts) / len(ts) for _, ts in groups], 'k_',
             ms=14, mew=2)
    ax2.set_xticks(range(len(groups)), ['Table 8 six', 'future five', 'far five'], fontsize=8)
    ax2.set(title='pooled by group', ylim=(0, 1.05))
    return fig
