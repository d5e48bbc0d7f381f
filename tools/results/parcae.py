"""Parcae: Table 2's stability on the RDM's Adam, Section 5.1 on Table 21's recipe (each side at its own
Muon rate) on characters and the battery, Table 12's L(T) forms, and the pair at a second size."""
import json
import math
import os

from tools.results.runner import read_log, val_curve
from tools.results.spec import BATTERY_N, CFG, PAPERS, PARCAE_ADAM_LRS, PARCAE_MUON_LRS, PARCAE_TUNED, STABILITY, \
    muon_run, seed_list
from tools.results.stats import FORMS, TESTS_HEAD, bracket, fit_forms, mean_sd, ranked, tests_cell, verdict
from tools.results.tables import comparison, first_dir, plt, rates_md, sizes, tokens_seen
from tools.results.tune import report_runs


def parcae(lab, seeds):
    """Table 2 (one seed per Adam rate), then Section 5.1's comparison on its recipe: the GPT 6L's and
    Parcae's Muon rates each widened until its best is inside, and at those rates the GPT 6L
    (parameter-matched), the GPT 12L (the depth ceiling: Parcae's 12 block applications a forward; at the
    GPT 6L's rate), Parcae and Parcae at fixed depth 1 (at Parcae's), each over seeds, on tiny Shakespeare
    and on the synthetic battery; Parcae's test-time depth and Table 12's four L(T) forms. Then the GPT 6L
    and Parcae at a second size (spec['small']: 20 tokens per parameter), each at its own rate, and the gap
    at both sizes against tokens per parameter."""
    spec, done = PAPERS['parcae'], {}
    parcae_train(lab, [(*muon_run(m, 'Shakespeare', lr), 1337) for m in PARCAE_TUNED for lr in PARCAE_MUON_LRS] +
                 [(name, args, 1337) for name, args in spec['runs'].items()], done)

    def loss_of(model):
        def loss(lr):
            name, args = muon_run(model, 'Shakespeare', lr)
            if (name, 1337) not in done:
                parcae_train(lab, [(name, args, 1337)], done)
            return parcae_row(lab, done, name)['mean']
        return loss
    brackets = {}    # model -> (its rates, the best, {rate: loss})
    for m in PARCAE_TUNED:
        lrs, best = bracket(PARCAE_MUON_LRS, loss_of(m))
        brackets[m] = (lrs, best, {lr: loss_of(m)(lr) for lr in lrs})
    ss = seed_list(spec, None, seeds)
    # as report_runs: every seed at the bracket's best two rates on Shakespeare, the lower mean wins
    two = {m: ranked(grid)[:2] for m, (_, _, grid) in brackets.items()}
    parcae_train(lab, [(*muon_run(m, 'Shakespeare', lr), s) for m in PARCAE_TUNED for lr in two[m] for s in ss], done)
    finals = {m: {lr: parcae_row(lab, done, muon_run(m, 'Shakespeare', lr)[0])['mean'] for lr in two[m]} for m in PARCAE_TUNED}
    chosen = {m: ranked(f)[0] for m, f in finals.items()}
    rate = {m: chosen[PARCAE_TUNED[0] if m.startswith('GPT') else PARCAE_TUNED[1]] for m in spec['depth']}
    slow = ('GPT 12L', 'Parcae', 'GPT 6L', 'Parcae mu=1')     # the longest first: two run at once
    depth = {st: [muon_run(m, st, rate[m])[0] for m in spec['depth']] for st in spec['settings']}
    parcae_train(lab, [(*muon_run(m, st, rate[m]), s) for m in slow for st in spec['settings'] for s in ss], done)
    rows = {name: parcae_row(lab, done, name) for name in dict.fromkeys(name for name, _ in done)}
    sweeps = {st: [done[(depth[st][2], s)][3]['sweep'] for s in ss] for st in spec['settings']}
    small_rows, _ = report_runs(lab, 'parcae-small', spec['small'], seeds)

    fig = parcae_figure(lab, rows, brackets, rate, depth, ss, sweeps, small_rows)
    md = parcae_stability_md(lab, rows, done, brackets, finals, chosen)
    for st in spec['settings']:
        md += parcae_depth_md(lab, st, rows, depth[st], ss, rate)
        if st == 'battery':
            md += parcae_exact_match_md([parcae_exact_match(done, rows[n]) for n in depth[st]])
        md += parcae_forms_md(st, ss, sweeps[st])
    # the first size's pair under the second's names, read from its runs at their rates
    first = [{**rows[name], 'run': m, 'dirs': [lab.run_dir('parcae', name, s) for s in ss]}
             for m in PARCAE_TUNED for name in [muon_run(m, 'Shakespeare', rate[m])[0]]]
    md += ['', f"Section 5.1's pair at a second size (d 48, 4 heads of 12; "
               f"{tokens_seen(first_dir(lab, 'parcae-small', small_rows[0])):,} tokens; config/results/parcae/*_small.py), "
               "on tiny Shakespeare with Table 21's recipe, each at its own Muon rate:", '',
           *rates_md(small_rows), '']
    both = [('parcae', first), ('parcae-small', small_rows)]
    md += sizes(lab, 'parcae', 'Parcae', [('GPT 6L', 'GPT 6L')], both, fig.axes[4])
    out = [rows[n] for n in spec['runs']] + [rows[muon_run(m, 'Shakespeare', lr)[0]] for m, (lrs, _, _)
                                             in brackets.items() for lr in lrs if lr != chosen[m]]
    out += [rows[n] for st in spec['settings'] for n in depth[st]]
    return out, fig, '\n'.join(md)


def parcae_train(lab, jobs, done):
    """Trains and scores the (name, args, seed) jobs not in done yet, lab.jobs at once, one thread each, into
    done[(name, seed)]."""
    args = {(name, seed): a for name, a, seed in jobs}
    lab.run_jobs(lambda j: parcae_run(lab, j[0], args[j], j[1]), list(args), done)


def parcae_run(lab, name, args, seed):
    """One run of the parcae paper, trained and read: (seconds, the iteration it diverged after or None,
    its stream loss or NaN, its readings: the battery for a battery run, the depth sweep for Parcae)."""
    out = lab.run_dir('parcae', name, seed)
    secs, diverged = lab.train_or_diverge(args, out, seed)
    if diverged is not None:
        return secs, diverged, float('nan'), {}
    read = {}
    if CFG + 'parcae/battery.py' in args:
        read['battery'] = lab.eval_json(out, 'battery.json', '--battery=True', f'--battery_n={BATTERY_N}')
    if name.startswith('Parcae,'):
        read['sweep'] = lab.evaluate(out, f"--sweep={PAPERS['parcae']['sweep']}")
    return secs, diverged, lab.evaluate(out, '--stream=True')['loss'], read


def parcae_row(lab, done, name):
    """A table row over every seed of the run trained so far."""
    ss = sorted(s for n, s in done if n == name)
    losses = [done[(name, s)][2] for s in ss]
    m, sd = mean_sd(losses)
    cfg = json.load(open(os.path.join(lab.run_dir('parcae', name, ss[0]), 'config.json')))
    return {'run': name, 'model': cfg['model'], 'seeds': ss, 'losses': losses, 'mean': m, 'sd': sd,
            'seconds': sum(done[(name, s)][0] for s in ss)}


def parcae_exact_match(done, row):
    """A battery run's exact match pooled over Table 8's six tasks (the prompt holds the answer's
    evidence), mean +- sd over its seeds, and per task over seeds."""
    from battery import FUTURE
    name, accs = row['run'], []
    for s in row['seeds']:
        tasks = done[(name, s)][3]['battery']['tasks']
        ts = [t for t in tasks if t not in FUTURE]
        accs.append(sum(tasks[t]['generate'] * tasks[t]['n'] for t in ts) / sum(tasks[t]['n'] for t in ts))
    m, sd = mean_sd(accs)
    return {'run': name, 'losses': accs, 'mean': m, 'sd': sd, 'tasks': ts, 'per_task': {
        t: sum(done[(name, s)][3]['battery']['tasks'][t]['generate'] for s in row['seeds']) / len(accs) for t in ts}}


def parcae_figure(lab, rows, brackets, rate, depth, ss, sweeps, small_rows):
    """Top: Table 2's loss against the Adam rate, its train losses and spectral radii, and the Muon rate
    brackets of the GPT 6L and Parcae with every depth run's seeds at its rate (the fifth: the gap at two
    sizes, which sizes() draws); bottom: each setting's val curves, Parcae's test-time depth, and the
    second size's rate brackets with its seeds at the best."""
    spec = PAPERS['parcae']
    fig, axs = plt.subplots(2, 5, figsize=(21, 7))
    parcae_stability_axes(lab, axs[0, 0], axs[0, 1], axs[0, 2], rows)
    for m, (lrs, _, grid) in brackets.items():
        axs[0, 3].plot(lrs, [grid[lr] for lr in lrs], 'o-', color=f'C{4 + list(spec["depth"]).index(m)}',
                       label=f'{m} (seed 1337)')
    for i, m in enumerate(spec['depth']):
        r = rows[muon_run(m, 'Shakespeare', rate[m])[0]]
        axs[0, 3].plot([rate[m] * 1.04 ** i] * len(r['losses']), r['losses'], 'x', color=f'C{4 + i}',
                       label=f'{m}, seeds')
    all_lrs = sorted({lr for lrs, _, _ in brackets.values() for lr in lrs})
    axs[0, 3].set(title='Table 21 recipe (Muon), tiny Shakespeare:\nval loss vs rate', xscale='log',
                  xlabel='learning rate', ylabel='nats / char')
    axs[0, 3].set_xticks(all_lrs, [f'{lr:g}' for lr in all_lrs])
    axs[0, 3].minorticks_off()
    for k, st in enumerate(spec['settings']):
        ax = axs[1, k]
        for i, name in enumerate(depth[st]):
            cs = [val_curve(lab.run_dir('parcae', name, s)) for s in rows[name]['seeds']]
            its = [it for it, _ in cs[0] if it > 0]
            ax.plot(its, [sum(dict(c)[it] for c in cs) / len(cs) for it in its], 'o-', ms=3, color=f'C{4 + i}',
                    label=name.split(',')[0])
        ax.set(title=f"{st}, Muon (GPT lr {rate['GPT 6L']:g}, Parcae lr {rate['Parcae']:g}):\nval loss (eval set, "
                     "mean of seeds)", xlabel='iteration', ylabel='nats / token')
        ax = axs[1, 2 + k]
        for s, sw in zip(ss, sweeps[st]):
            ax.plot(sw['values'], sw['loss'], 'o-', ms=3, label=f'seed {s}')
        ax.axvline(spec['mu'], color='gray', ls=':', label='trained mean depth')
        ax.set(title=f'{st}: Parcae, test-time depth', xlabel='num_recur T', ylabel='val loss (eval set)')
    for r in small_rows:
        i = list(spec['depth']).index(r['run'])
        lrs = [float(lr) for lr in r['grid']]
        axs[1, 4].plot(lrs, list(r['grid'].values()), 'o-', color=f'C{4 + i}',
                       label=f"{r['run']} (seed {r['seeds'][0]})")
        axs[1, 4].plot([r['lr'] * 1.04 ** i] * len(r['losses']), r['losses'], 'x', color=f'C{4 + i}',
                       label=f"{r['run']}, seeds")
    small_lrs = sorted({float(lr) for r in small_rows for lr in r['grid']})
    axs[1, 4].set(title='second size (d 48), Table 21 recipe,\ntiny Shakespeare: val loss vs rate', xscale='log',
                  xlabel='learning rate', ylabel='nats / char')
    axs[1, 4].set_xticks(small_lrs, [f'{lr:g}' for lr in small_lrs])
    axs[1, 4].minorticks_off()
    for ax in axs.flat:
        if ax is not axs[0, 4]:
            ax.legend(fontsize=6)
    return fig


def parcae_stability_axes(lab, ax_lr, ax_loss, ax_rho, rows):
    """Table 2's runs: val loss against the Adam rate, and the train loss and spectral radius over training."""
    for i, (fam, _) in enumerate(STABILITY):
        pts = [(lr, rows[f'{fam}, Adam lr {lr:g}']['mean']) for lr in PARCAE_ADAM_LRS]
        ax_lr.plot(*zip(*pts), 'o-', color=f'C{i}', label=fam)
    ax_lr.set(title="Table 2 recipe (RDM's Adam): val loss\n(whole stream) vs peak rate, seed 1337",
              xscale='log', xlabel='learning rate', ylabel='nats / char')
    ax_lr.set_xticks(PARCAE_ADAM_LRS, [f'{lr:g}' for lr in PARCAE_ADAM_LRS])
    ax_lr.minorticks_off()
    for j, lr in enumerate(PARCAE_ADAM_LRS):
        for (fam, _), ls in zip(STABILITY[:3], ('-', '--', ':')):
            log = [r for r in read_log(lab.run_dir('parcae', f'{fam}, Adam lr {lr:g}', 1337)) if r.get('kind') == 'train']
            loss = [r['loss'] for r in log]   # a running mean of 5 logs: the spikes stay, the batch noise goes
            mean5 = [sum(loss[max(0, i - 4):i + 1]) / len(loss[max(0, i - 4):i + 1]) for i in range(len(loss))]
            label = f'{fam} lr {lr:g}'
            ax_loss.plot([r['iter'] for r in log], mean5, ls, color=f'C{j}', lw=1, label=label)
            ax_rho.plot([r['iter'] for r in log], [r.get('spectral_radius', math.nan) for r in log], ls,
                        color=f'C{j}', lw=1, label=label)
    ax_loss.set(title='train loss, mean of 5 logs\n(solid Parcae, dashed RDM res. norm, dotted base)',
                xlabel='iteration', ylabel='nats / char', ylim=(1.4, 3.4))
    ax_rho.set(title='spectral radius of the injection\n(lines as in the train loss)', xlabel='iteration',
               ylabel='rho(A_bar)')


def parcae_stability_md(lab, rows, done, brackets, finals, chosen):
    """The recipes, Table 2's stability table with its noise floor, and each tuned model's rate grid and
    the means over seeds at its best two rates."""
    gpt_rise = max(stability(lab.run_dir('parcae', f'GPT 6L, Adam lr {lr:g}', 1337), 50)['rise'] for lr in PARCAE_ADAM_LRS)
    md = [f"Recipes. Table 2 (stability): the RDM's Adam (Q.1: update clipping, atan2 without epsilon, trapezoid, "
          f"{tokens_seen(lab.run_dir('parcae', f'Parcae, Adam lr {PARCAE_ADAM_LRS[0]:g}', 1337)):,} tokens), one seed (1337) "
          "per rate. Section 5.1 (quality): the paper's own, Table 21 (config/results/parcae/muon.py: Muon with Polar "
          "Express, variance reduction and cautious weight decay 0.2 decaying to 0 for the matrices, AdamW betas "
          "(0.8, 0.95), eps 1e-10 for the rest, one rate for both, no warmup, 50% cooldown); the GPT 6L and Parcae "
          "each at its own best rate (the paper takes Parcae at the GPT's), the GPT 12L at the GPT 6L's and "
          "Parcae mu=1 at Parcae's.", '',
          'Stability (Table 2; seed 1337; the largest rise of the logged train loss over the lowest of the 10 logs '
          "before it, after warmup; spectral radius, largest singular value of the injection and state norm from "
          "train.py's log):", '',
          '| run | diverged | val loss | largest loss rise | spectral radius end (max) | largest singular value end '
          '(max) | state norm end (max) |', '|---|---|---|---|---|---|---|']
    for lr in PARCAE_ADAM_LRS:
        for fam, _ in STABILITY:
            name = f'{fam}, Adam lr {lr:g}'
            st, d = stability(lab.run_dir('parcae', name, 1337), 50), done[(name, 1337)][1]
            loop = not fam.startswith('GPT')
            md.append(f"| {name} | {'no' if d is None else f'after iter {d}'} | {rows[name]['mean']:.3f} | "
                      f"{st['rise']:.3f} | " + (f"{st['rho_end']:.3f} ({st['rho_max']:.3f}) | {st['sigma_end']:.3f} "
                      f"({st['sigma_max']:.3f}) | {st['norm_end']:.1f} ({st['norm_max']:.1f}) |" if loop else '| | |'))
    md += ['', f"The rise metric's noise floor: {gpt_rise:.3f}, its largest value over the GPT's three runs, "
               "where nothing loops and nothing spikes; a looped run's rise is a spike only above it.", '']
    for m, (lrs, best, grid) in brackets.items():
        md.append(f"Table 21's rate for the {m} on tiny Shakespeare (seed 1337, whole val stream): " +
                  ' | '.join(f'{lr:g}: {grid[lr]:.3f}' for lr in lrs) + f". Best {best:g}, inside the grid"
                  + ('' if best not in (lrs[0], lrs[-1]) else ' edge (the grid stopped at 7 rates)') +
                  '; the mean over every seed at the best two: ' +
                  ', '.join(f'{lr:g}: {v:.3f}' for lr, v in finals[m].items()) + f" -> {chosen[m]:g}.")
    return md


def parcae_depth_md(lab, st, rows, names, ss, rate):
    """One setting's comparison: Parcae against the GPT 6L, the GPT 12L and itself at fixed depth 1."""
    deep = verdict(rows[names[1]], rows[names[0]])
    md = ['', f"{st} ({PAPERS['battery']['data'] if st == 'battery' else 'tiny Shakespeare characters'}; "
              f"{tokens_seen(lab.run_dir('parcae', names[0], ss[0])):,} tokens), Table 21 (the GPTs at lr "
              f"{rate['GPT 6L']:g}, Parcae at {rate['Parcae']:g}), seeds "
              f"{', '.join(map(str, ss))}: Parcae (ref) against the parameter-matched GPT 6L, the FLOPs-matched "
              "GPT 12L and itself at fixed depth 1:", '']
    md += comparison(lab, 'parcae', list(rows.values()), {n: [val_curve(lab.run_dir('parcae', n, s)) for s in rows[n]['seeds']]
                                                     for n in names}, names[2], [names[2], names[0], names[1], names[3]])
    return md + ['', f"Depth on the val loss: GPT 12L against GPT 6L, {deep} ({rows[names[1]]['mean']:.3f} vs "
                     f"{rows[names[0]]['mean']:.3f}; {tests_cell(rows[names[1]], rows[names[0]])})."]


def parcae_exact_match_md(acc):
    """The battery setting's exact match table (acc: GPT 6L, GPT 12L, Parcae, Parcae mu=1)."""
    md = ['', "Exact match (greedy generation after the prompt) pooled over Table 8's six tasks, whose prompt "
              f"holds the answer's evidence ({BATTERY_N} val examples a task), mean +- sd over seeds:", '',
          '| run | exact match | per seed | ' + ' | '.join(acc[0]['tasks']) +
          f' | Parcae - run: {TESTS_HEAD} | Parcae vs run |',
          '|---|---|---|' + '---|' * (len(acc[0]['tasks']) + 2)]
    for a in acc:
        md.append(f"| {a['run']} | {a['mean']:.3f} +- {a['sd']:.3f} | {', '.join(f'{x:.3f}' for x in a['losses'])} | "
                  + ' | '.join(f"{a['per_task'][t]:.3f}" for t in a['tasks']) + ' | '
                  + (' | ' if a is acc[2] else f"{tests_cell(acc[2], a)} | {verdict(acc[2], a, higher=True)}") + ' |')
    return md + ['', f"Depth on the battery: GPT 12L against GPT 6L, {verdict(acc[1], acc[0], higher=True)} "
                     f"({acc[1]['mean']:.3f} vs {acc[0]['mean']:.3f} exact match; {tests_cell(acc[1], acc[0])})."]


def parcae_forms_md(st, ss, sweeps):
    """Parcae's test-time depth in one setting, and Table 12's four L(T) forms fit to each seed's curve."""
    mu = PAPERS['parcae']['mu']
    gaps = [sw['loss'][0] - sw['loss'][sw['values'].index(mu)] for sw in sweeps]
    m, sd = mean_sd(gaps)
    fits = [fit_forms(sw['values'], sw['loss'], mu) for sw in sweeps]
    md = ['', f"Test-time depth of Parcae ({st}, eval set, T = 1..12, trained mean depth {mu}): L(1) - "
              f"L({mu}) = {m:.4f} +- {sd:.4f} over seeds ({', '.join(f'{g:.4f}' for g in gaps)}); "
              "per seed " + '; '.join(f"{s}: " + ' '.join(f'{l:.3f}' for l in sw['loss']) for s, sw in zip(ss, sweeps)),
          '', f"Table 12's forms on these curves: mean Huber loss per point (x 1e-7) on log loss, the mean over "
              f"the seeds' fits; extrapolation: fit on T <= {mu}, scored on T > {mu}.", '',
          '| fit | ' + ' | '.join(FORMS) + ' |', '|---|' + '---|' * len(FORMS)]
    for key, label in (('in', 'in-distribution (all T)'), ('extrapolation', f"extrapolation (T > {mu})")):
        md.append(f'| {label} | ' + ' | '.join(f"{sum(f[form][key] for f in fits) / len(fits) * 1e7:.2f}"
                                                for form in FORMS) + ' |')
    ext = {form: sum(f[form]['extrapolation'] for f in fits) / len(fits) for form in FORMS}
    first, second = sorted(ext, key=ext.get)[:2]
    return md + ['', f"Extrapolation: {first} is best, {ext[second] / max(ext[first], 1e-30):.1f}x below {second}; " +
                 ("the exponential form is identified here as in the paper (at least 2x below every other)."
                  if first == 'L_inf + Z exp(-zT)' and ext[second] >= 2 * ext[first] else
                  "the form cannot be identified at this scale (the paper's exponential is not at least 2x below "
                  "every other form).")]


def stability(out, warmup):
    """From a run's train log: the largest rise of the loss over the lowest of the 10 logs before it
    (after warmup), and the spectral radius and state norm at the end and at most."""
    log = [r for r in read_log(out) if r.get('kind') == 'train']
    loss = [r['loss'] for r in log]
    rise = max([loss[i] - min(loss[i - 10:i]) for i in range(10, len(loss)) if log[i]['iter'] > warmup], default=0.0)
    rho, norm = [r.get('spectral_radius', float('nan')) for r in log], [r.get('state_norm', float('nan')) for r in log]
    sigma = [r.get('singular_value', float('nan')) for r in log]
    return {'rise': rise, 'rho_end': rho[-1], 'rho_max': max(rho), 'norm_end': norm[-1], 'norm_max': max(norm),
            'sigma_end': sigma[-1], 'sigma_max': max(sigma)}
