"""The depth gate (GPT 3L against GPT 6L on battery.py's hops, after a curriculum of hop counts), then the
looped models' depth sweeps against their depth-1 controls."""
import json
import math
import os
from concurrent.futures import Future, ThreadPoolExecutor

from battery import UP_TO
from tools.results.pool import fail
from tools.results.runner import Unrecorded, val_curve
from tools.results.spec import DEPTH_LRS, HOP_N, PAPERS, RATE_SEED, STAGE_REPEATS
from tools.results.stats import TESTS_HEAD, bracket, mean_sd, seed_row, tests_cell, verdict
from tools.results.tables import counts, plt, retrained_md, tokens_seen, write


DEEP = '3+ lookups'    # a looped model's reading pooled over the hop counts the gate is about


def depth(lab, seeds):
    """The depth gate: on battery.py's hops (the answer k pointer lookups away, the loss on the answer
    only; each run after a curriculum, hop counts 1 ... N for N = 1 ... 5, a stage repeated while its
    newest hop is not learned), a GPT 3L and a GPT 6L, each at its own best rate (bracket() over
    DEPTH_LRS on RATE_SEED alone, by the answer loss on the whole val stream), then over the seeds after it at
    that rate; exact match of greedy generation after the prompt on HOP_N test examples per k (the test split,
    which no rate, repeat or stop reads). The gate holds where
    the 6-layer GPT's lead 'holds' (stats.verdict) at every k that needs three lookups or more (battery.lookups:
    k = 3, 4, 5; k = 6 is two lookups back around the cycle): only then can this task show what depth buys a looped
    model (Parcae's num_recur, the workspace's rounds, TextNCA's Ts against their fixed-depth controls);
    results/depth.md holds the gate's table as soon as it is decided, then each looped model's against its
    control as that pair is decided (the runs train side by side, slot() giving the first pair's first).

        python prepare_data.py hops --n_test 1200; for n in 1 2 3 4 5; do python prepare_data.py hops$n; done
        python -m tools.results depth

    Under --rebuild, runs the records lack yet leave the tables pending: depth_progress_md() lists what is
    recorded and what is not, and no verdict is drawn from fewer seeds than asked."""
    spec, done = PAPERS['depth'], {}
    ss = list(range(RATE_SEED + 1, RATE_SEED + 1 + seeds))
    with ThreadPoolExecutor(len(spec['runs'])) as pool:
        tuned = {name: pool.submit(depth_tune, lab, name, done, ss) for name in spec['runs']}
        try:
            grids, best = ({name: f.result()[i] for name, f in tuned.items()} for i in (0, 1))
        except BaseException as e:
            raise lab.failure(tuned.values(), e)
    if pending(spec['runs'], best, ss, done):
        return depth_progress(lab, grids, best, ss, done)
    unread = [n for n in spec['runs'] if best[n] is None]
    if unread:    # a GPT that never reads the listing shows nothing about depth, and there is no curve to test
        fig = plt.figure(figsize=(5.7, 4))
        bracket_axes(fig.add_subplot(1, 1, 1), grids)
        return [], fig, f"**Gate: not decidable on this task.** {unread_line(unread, grids)}, and the looped " \
                        f"models' depth sweeps ({', '.join(spec['looped'])}) were not run."
    rows, acc = depth_rows(lab, spec['runs'], best, ss, done)
    md, holds = depth_md(acc, grids, best, {name: [done[(name, best[name], s)][3] for s in ss] for name in spec['runs']},
                         ss[0])
    md += retrained_md(retrained_runs(spec['runs'], best, ss, done), 'answer loss')
    fig = depth_figure(acc, grids, best, holds)
    if not holds:    # neither trained nor read: records of earlier protocols' sweeps are not this one's
        md += ['', f"The gate does not hold, so the looped models' depth sweeps ({', '.join(spec['looped'])}: "
                   "config/results/depth/) were not run."]
        return rows, fig, '\n'.join(md)
    # the gate's table now: the looped models' sweep takes hours more
    write(lab, 'depth', rows, fig, '\n'.join(md + ['', "The looped models' depth sweeps are still training (the same "
                                                 "command resumes them and rewrites this file)."]), seeds)
    pairs = list(spec['controls'].items())
    with ThreadPoolExecutor(len(spec['looped'])) as pool:    # all side by side, slot() training the first pair's first
        bracketed = {name: Future() for name in spec['looped']}
        tuned = {name: pool.submit(depth_tune, lab, name, done, ss, bracketed) for name in spec['looped']}
        l_rows, l_md = [], []
        for i in range(1, len(pairs) + 1):    # each pair's table as soon as it is decided
            names = [name for pair in pairs[:i] for name in pair]
            try:
                l_grids, l_best = ({name: tuned[name].result()[j] for name in names} for j in (0, 1))
            except BaseException as e:    # a run failed: the others stop now, not after their hours of training
                raise lab.failure(tuned.values(), e)
            if pending(names, l_best, ss, done):    # under --rebuild: the pairs decided, then what the others lack
                rest = {n: tuned[n].result() for pair in pairs[i - 1:] for n in pair}
                return depth_progress(lab, {n: g for n, (g, _) in rest.items()}, {n: b for n, (_, b) in rest.items()},
                                      ss, done, md + ['', *l_md], rows + l_rows, fig)
            unread = [n for n in names if l_best[n] is None]
            read = [n for n in names if l_best[n] is not None and not alone(n, l_best)]
            l_rows, l_acc = depth_rows(lab, read, l_best, ss, done)
            l_md = depth_looped_md(l_acc, l_grids, l_rows, acc, {n: done[(n, l_best[n], ss[0])][3] for n in read}) \
                if read else []
            l_md += depth_unread_md(unread, l_grids, l_best)
            l_md += retrained_md(retrained_runs(read, l_best, ss, done), 'answer loss')
            fig = depth_figure(acc, grids, best, holds)
            depth_looped_axes(fig.add_subplot(1, 3, 3), l_acc, acc)
            if i < len(pairs):
                rest = f"{', '.join(n for pair in pairs[i:] for n in pair)}: still training (the same command " \
                       "resumes them and rewrites this file)."
                write(lab, 'depth', rows + l_rows, fig, '\n'.join(md + ['', *l_md, rest]), seeds)
    return rows + l_rows, fig, '\n'.join(md + ['', *l_md])


def pending(names, best, ss, done):
    """The (run, seed)s of names that the records lack (only under --rebuild): RATE_SEED's where the rate is not
    chosen yet, else the reported seeds' not recorded."""
    return [(n, s) for n in names
            for s in ([RATE_SEED] if best[n] == PENDING else [] if best[n] is None or alone(n, best) else ss)
            if best[n] == PENDING or done[(n, best[n], s)] is None]


def depth_progress(lab, grids, best, ss, done, md=(), rows=(), fig=None):
    """The tables while the records lack runs (--rebuild before every run is trained): what each run of grids
    has recorded, and no verdict. md, rows, fig: the sections, rows and figure decided before them (until a looped
    pair is decided, the figure's third slot counts the seeds recorded). Returns depth()'s triple."""
    rows, lines = list(rows), []
    names = [n for n in grids if best[n] is not None and not alone(n, best)]    # the runs with seeds to come
    for name in grids:
        if best[name] is None:
            lines.append(f"- {unread_line([name], grids)}: its pair is not decidable on this task")
        if alone(name, best):
            lines.append(f"- {alone_line(name, grids, best)}")
        if name not in names:
            continue
        if best[name] == PENDING:
            lines.append(f"- {name}: rate not chosen yet (seed {RATE_SEED}'s answer loss so far: " +
                         (grid_md(grids[name]) or 'none') + ')')
            continue
        have = [s for s in ss if done[(name, best[name], s)] is not None]
        if have:
            rows += depth_rows(lab, [name], best, have, done)[0]
        knob = PAPERS['depth']['knob'].get(name)
        read = (lambda r: ', '.join(f"{knob} {v} {deep_hops(r[v]):.3f}" for v in r)) if knob else \
            (lambda r: ', '.join(f"k = {t[3:]} {x:.3f}" for t, x in r.items()))
        rest = ', '.join(str(s) for s in ss if s not in have)
        seeds = [f"seed {s}: {read(done[(name, best[name], s)][2])}" for s in have] + ([f"pending: {rest}"] if rest else [])
        lines.append(f"- {name} (lr {best[name]:g}; seed {RATE_SEED}'s answer loss {grid_md(grids[name])}): " +
                     '; '.join(seeds))
    have = sum(best[n] != PENDING and done[(n, best[n], s)] is not None for n in names for s in ss)
    md = [*md, *([''] if md else []), f"**Pending: no verdict yet.** The verdicts read {len(ss)} seeds a side ({ss[0]} ... {ss[-1]}) on "
          f"the test split; the records hold {have} of those {len(ss) * len(names)} runs so far (exact match per k for the gate's GPTs, at three lookups or more per test-time depth "
          "for the looped models), and `python -m tools.results depth` trains the rest:", '', *lines,
          *retrained_md(retrained_runs([n for n in names if best[n] != PENDING], best, ss, done), 'answer loss')]
    if fig is None:    # the gate not decided yet
        fig = plt.figure(figsize=(5.7, 4))
        fig.add_subplot(1, 1, 1)
    elif len(fig.axes) < 3:    # the gate's figure, its slot for the looped pairs empty
        fig.add_subplot(1, 3, 3)
    ax = fig.axes[-1]
    if not ax.has_data():
        ax.barh(names, [0 if best[n] == PENDING else sum(done[(n, best[n], s)] is not None for s in ss) for n in names])
        ax.set(title='reported seeds recorded', xlabel='seeds', xlim=(0, len(ss)))
    return rows, fig, '\n'.join(md)


class Pending(Exception):
    """Under --rebuild, a rate-seed run the records lack: the run's rate is not known yet."""


PENDING = 'pending'


def depth_tune(lab, name, done, ss, bracketed=None):
    """One run's rate, bracket() over DEPTH_LRS on RATE_SEED by the answer loss, then its seeds ss at that
    rate: ({lr: loss}, the rate). A model that reads no listing at any rate of DEPTH_LRS has no rate to
    find: ({lr: its one-hop loss}, None), no wider grid, no more seeds. Under --rebuild, a bracket the
    records do not finish: ({lr: loss} recorded, PENDING). bracketed: the looped runs' {name: Future}, each
    given its run's rate once bracketed; a looped run trains no seeds where the other side of its pair
    (partner()) read no listing: that pair is not decidable whatever its seeds would read."""
    try:
        grid, best = depth_bracket(lab, name, done)
    except BaseException as e:
        if bracketed:
            bracketed[name].set_exception(e)
        raise
    if bracketed:
        bracketed[name].set_result(best)
    if best in (None, PENDING) or bracketed and bracketed[partner(name)].result() is None:
        return grid, best
    with lab.live(depth_rank(name)):
        depth_train(lab, [(name, best, s) for s in ss], done)
    return grid, best


def depth_bracket(lab, name, done):
    """depth_tune()'s bracket alone, trained on RATE_SEED: ({lr: loss}, the rate, or None or PENDING)."""
    def got(lr):
        if done[(name, lr, RATE_SEED)] is None:
            raise Pending
        return done[(name, lr, RATE_SEED)]

    def loss(lr):
        depth_train(lab, [(name, lr, RATE_SEED)], done)
        return got(lr)[1] if got(lr)[2] is not None else math.inf
    with lab.live(depth_rank(name)):
        try:
            depth_train(lab, [(name, lr, RATE_SEED) for lr in DEPTH_LRS], done)
            if all(got(lr)[2] is None for lr in DEPTH_LRS):
                return {lr: got(lr)[1] for lr in DEPTH_LRS}, None
            lrs, best = bracket(DEPTH_LRS, loss)
        except Pending:
            return {j[1]: done[j][1] for j in sorted(done) if j[0] == name and j[2] == RATE_SEED and done[j]}, PENDING
    return {lr: got(lr)[1] for lr in lrs}, best


def grid_md(grid):
    """A rate bracket's {lr: answer loss} as text: 'lr loss, lr loss'."""
    return ', '.join(f'{lr:g} {v:.3f}' for lr, v in grid.items())


def partner(name):
    """The other side of a looped run's pair (its control, or the model a control is for); None for a GPT."""
    pairs = PAPERS['depth']['controls']
    return pairs.get(name) or next((m for m, c in pairs.items() if c == name), None)


def alone(name, best):
    """name read the listing and the other side of its pair at no rate: the pair is not decidable, and name's
    reported seeds are not trained."""
    return best[name] not in (None, PENDING) and partner(name) in best and best[partner(name)] is None


def depth_rows(lab, runs, best, ss, done):
    """The table rows (answer loss over seeds) and the exact match, mean and sd over seeds: per task for
    a GPT ({task: {'mean', 'sd', 'xs'}}), per test-time depth and task for a looped model."""
    rows, acc = [], {}
    for name in runs:
        got = [done[(name, best[name], s)] for s in ss]
        m, sd = mean_sd([g[1] for g in got])
        dirs = [g[3][-1][1] for g in got]
        model = json.load(open(os.path.join(dirs[0], 'config.json')))['model']
        rows.append({'run': f'{name} (lr {best[name]:g})', 'model': model, 'seeds': ss, 'dirs': dirs,
                     'losses': [g[1] for g in got],
                     'mean': m, 'sd': sd, 'seconds': sum(g[0] for g in got)})
        per = lambda reads: {t: seed_row([r[t] for r in reads]) for t in reads[0]}  # noqa: E731
        acc[name] = ({v: per([{**g[2][v], DEEP: deep_hops(g[2][v])} for g in got]) for v in got[0][2]}
                     if name in PAPERS['depth']['looped'] else per([g[2] for g in got]))
    return rows, acc


def depth_rank(name):
    """A run's place in the order slot() trains them: the gate's GPTs, then the looped models as listed."""
    return [*PAPERS['depth']['runs'], *PAPERS['depth']['looped']].index(name)


def depth_train(lab, jobs, done):
    """Trains and reads the (name, lr, seed) jobs into done, each in its own thread, slot() deciding which
    train: the first of the runs and looped models first, then the lowest seed, then the lowest rate."""
    def run(job):
        name, lr, seed = job
        with lab.slot((depth_rank(name), seed, lr)):
            try:
                return depth_run(lab, name, lr, seed)
            except Unrecorded:
                if lab.opts.rebuild:    # pending: the tables say so
                    return None
                raise
    lab.run_jobs(run, jobs, done, threads=max(1, len(jobs)))


def stage_dir(lab, name, lr, n, seed, r=0, alt=''):
    """The run folder of the curriculum's stage n (hop counts 1 ... n), or of the task itself (n None);
    r: the stages repeated before it on its run's curriculum (a run that repeats none keeps the plain names);
    alt: one of ALTS (own_dir)."""
    return lab.run_dir('depth', f'{name} lr {lr:g}' + (f' up to {n} hops' if n else '') + (f' +{r}' if r else '') +
                       (f' {alt}' if alt else ''), seed)


ALTS = ('', *'bcdefgh')


def own_dir(lab, args, name, lr, n, seed, r):
    """The folder of the stage that args train: stage_dir(), or the first name of ALTS free of a run from other
    weights (a curriculum sent down another path can meet the old path's stage and repeat count again) and, for a
    curriculum stage, of a retrain that ended elsewhere than its record (retrained_elsewhere), so that the old
    records stay as they are and the repeat rule reads the curve of the weights the next stage starts from."""
    for alt in ALTS:
        out = stage_dir(lab, name, lr, n, seed, r, alt)
        if not lab.held_otherwise(out, args) and not (n and retrained_elsewhere(lab, out)):
            return out
    fail(f"{stage_dir(lab, name, lr, n, seed, r)} and its alternatives {', '.join(ALTS[1:])} each hold another run "
         "than this curriculum's: move them aside")


def retrained_elsewhere(lab, out):
    """The run in out was trained again for its checkpoint and ended elsewhere than its record (runner.ensure_ckpt's
    eval/retrain.json, in its folder or its record): its weights here are another run than its recorded curve."""
    run = lab.record_of(out)
    return os.path.isfile(os.path.join(out, 'eval', 'retrain.json')) or \
        'retrain.json' in ((lab.records.get(run) if run else None) or {}).get('eval', {})


def stage_learned(out, n):
    """Stage n (hop counts 1 ... n) has learned its newest hop: its last answer loss is below half of what it is
    with hops 1 ... n - 1 exact and hop n at chance, -ln(chance) / n (the n hop counts are equally frequent)."""
    from battery import CHANCE
    return val_curve(out)[-1][1] < -math.log(CHANCE[f'hop{n}of{n}']) / (2 * n)


def readings_recorded(lab, name, lr, seed):
    """The records hold a test reading of this seed's task stage (after any number of repeats)."""
    runs = (lab.record_of(stage_dir(lab, name, lr, None, seed, r, alt))
            for r in range(len(UP_TO) * STAGE_REPEATS + 1) for alt in ALTS)
    return any(k.startswith('test/') for run in runs if run for k in (lab.records.get(run) or {}).get('eval', {}))


def listing_unread(out):
    """The one-hop stage ends no better than a uniform guess among the listed letters (ln 7): the run has not
    read the listing, and every later hop is a lookup in it. TextNCA sat at ln 26 = 3.258 (its GRU state
    saturated, the answer blind to the listing) at every rate; every run that went on learned below 1.3."""
    from battery import CHANCE
    return val_curve(out)[-1][1] >= -math.log(CHANCE['hop1of1'])


def depth_run(lab, name, lr, seed):
    """One run of the depth task (a GPT of the gate or a looped model) at one rate and seed, after its
    curriculum (each stage from the one before's weights, repeated while its newest hop is not learned):
    (seconds, answer loss on the val stream, {task: exact match on the test split} or a looped model's per
    test-time depth {depth: {task: exact match}}, [(n, folder)] of every stage trained, the task's last with n
    None). RATE_SEED's run reads no exact match ({}: only its loss chooses the rate); where its one-hop stages
    leave the listing unread it stops there: (seconds, their last answer loss, None, stages)."""
    spec, rate = PAPERS['depth'], [f'--learning_rate={lr}', f'--min_lr={lr / 10:g}']
    args = {**spec['runs'], **spec['looped']}[name]
    secs, start, r, stages = 0, [], 0, []
    # a reported seed's readings need its weights: a stage restored from its record is trained again for them,
    # and where that ends elsewhere (another CPU's record) the curriculum goes on from a run of its own, trained
    # anew from the stage before, so the rule reads the curve of the weights the readings read
    retrain = seed != RATE_SEED and not lab.opts.rebuild and not readings_recorded(lab, name, lr, seed)
    for n in UP_TO:
        for again in range(STAGE_REPEATS + 1):
            stage_args = args + spec['stage'] + rate + [f'--dataset=hops{n}'] + start
            stage = own_dir(lab, stage_args, name, lr, n, seed, r)
            secs += lab.train(stage_args, stage, seed)
            if retrain:
                lab.ensure_ckpt(stage)
                if retrained_elsewhere(lab, stage):
                    stage = own_dir(lab, stage_args, name, lr, n, seed, r)
                    secs += lab.train(stage_args, stage, seed)
            start, stages = [f'--init_from={stage}'], stages + [(n, stage)]
            if again == STAGE_REPEATS or stage_learned(stage, n):
                break
            r += 1
        if n == 1 and seed == RATE_SEED and listing_unread(stage):   # the reported seeds' tables need the task
                                                                      # read at a rate where RATE_SEED read it
            return secs, val_curve(stage)[-1][1], None, stages
    task_args = args + spec['stage'] + rate + ['--dataset=hops'] + start    # the task (hop counts 1 ... 6)
    out = own_dir(lab, task_args, name, lr, None, seed, r)
    secs += lab.train(task_args, out, seed)

    if seed == RATE_SEED:
        return secs, lab.evaluate(out, '--stream=True')['loss'], {}, stages + [(None, out)]

    def hops(*knob, sub=''):
        tasks = lab.eval_json(out, 'battery.json', '--battery=True', '--split=test', f'--battery_n={HOP_N}', *knob,
                              sub=f'test/{sub}'.rstrip('/'))['tasks']
        return {t: r['generate'] for t, r in tasks.items()}
    knob = spec['knob'].get(name)
    acc = {v: hops(f'--{knob}={v}', sub=f'{knob}{v}') for v in spec['sweep']} if knob else hops()
    # after the exact match: a reading newer than the checkpoint is kept, so both read the same weights
    return secs, lab.evaluate(out, '--stream=True')['loss'], acc, stages + [(None, out)]


def depth_md(acc, grids, best, stages, seed):
    """The rate brackets, the exact match per hop count with the verdicts, and the gate. stages: {GPT:
    [depth_run()'s stages per seed]}, the first seed's being seed."""
    from battery import CHANCE, lookups
    shallow, deep = PAPERS['depth']['runs']
    dirs = [d for _, d in stages[deep][0]]
    *curriculum, out = stages[deep][0]
    size = {name: counts(runs[0][-1][1]) for name, runs in stages.items()}
    md = [f"Each GPT's rate: the lowest answer loss of seed {RATE_SEED} (trained for that alone, not reported) over " +
          '; '.join(
              f"{name} {grid_md(grids[name])}" for name in grids) +
          ". Parameters (paper convention / non-embedding) and FLOPs per token: " + '; '.join(
              f"{name} {p:,} / {e:,}, {f / 1e6:.2f}M" for name, (p, e, f) in size.items()) +
          f". The {deep} at its rate, seed {seed}: {tokens_seen(out[1]):,} tokens seen on the task after "
          f"{sum(tokens_seen(d) for _, d in curriculum):,} on its curriculum ({sum(map(tokens_seen, dirs)) / size[deep][1]:.0f} "
          f"per non-embedding parameter), 8 answers in every window (one listing a window; the first answer "
          f"scored); the answer loss at the end of each stage (hop counts 1 ... N, a stage repeated from its own end "
          f"while its loss is above half of what it is with hop N at chance, at most {STAGE_REPEATS} times): " +
          ', '.join(f"N = {n} " + ' then '.join(f'{val_curve(d)[-1][1]:.3f}' for m, d in curriculum if m == n)
                    for n in UP_TO) + '. Stages repeated, per seed: ' + '; '.join(
              f"{name} " + ', '.join(str(len(runs) - 1 - len(UP_TO)) for runs in stages[name]) for name in stages) +
          '.', '',
          f'| hops k | lookups | chance | {shallow} | {deep} | {deep} - {shallow} | {TESTS_HEAD} | verdict |',
          '|---|---|---|---|---|---|---|---|']
    gate = []
    for t in acc[deep]:
        k = int(t[3:])
        v = verdict(acc[deep][t], acc[shallow][t], higher=True)
        if lookups(k) >= 3:
            gate.append(v == 'holds')
        md.append(f"| {k} | {lookups(k)} | {CHANCE[t]:.3f} | {acc[shallow][t]['mean']:.3f} +- "
                  f"{acc[shallow][t]['sd']:.3f} | {acc[deep][t]['mean']:.3f} +- {acc[deep][t]['sd']:.3f} | "
                  f"{acc[deep][t]['mean'] - acc[shallow][t]['mean']:+.3f} | "
                  f"{tests_cell(acc[deep][t], acc[shallow][t])} | {v} |")
    return md + ['', f"**Gate: {'holds' if all(gate) else 'does not hold'}** ({deep} ahead, the verdict "
                     f"'holds': by more than two sd, Welch p < 0.05 and the bootstrap interval above 0, at "
                     f"{sum(gate)} of the {len(gate)} hop counts that need three lookups or more). Lookups: the fewest "
                     f"pointer lookups that answer k, min(k, 8 - k), since k steps along the 8-cycle are 8 - k back. "
                     f"Exact match: greedy generation after the prompt equals the answer, {HOP_N} test examples per k "
                     f"(a split that no rate, repeat or stop reads), "
                     f"mean +- sd over seeds."], all(gate)


def deep_hops(reads):
    """Exact match pooled over the hop counts that need three lookups or more: {task: value} -> their mean."""
    from battery import lookups
    ks = [t for t in reads if t.startswith('hop') and lookups(int(t[3:])) >= 3]
    return sum(reads[t] for t in ks) / len(ks)


def retrained_runs(names, best, ss, done):
    """(run seed, its task stage's folder) of each reported run, for tables.retrained_md."""
    return [(f"{name} seed {s}", done[(name, best[name], s)][3][-1][1]) for name in names for s in ss
            if done.get((name, best[name], s))]


def depth_looped_md(acc, grids, rows, gpt, stages):
    """Each looped model against its depth-1 control at every test-time depth: exact match at three
    lookups or more (each seed's mean over k = 3, 4, 5, then mean +- sd over seeds). rows: depth_rows()'s, in
    acc's order (the pairs decided); stages: each run's depth_run() stages on the first seed, for its tokens
    per parameter."""
    spec = PAPERS['depth']
    ss, first = rows[0]['seeds'], {name: row['dirs'][0] for name, row in zip(acc, rows)}
    run = {name: row['run'] for name, row in zip(acc, rows)}

    def size(name):
        p, e, f = counts(first[name])
        return f"{name} {p:,} / {e:,}, {f / 1e6:.2f}M, {sum(tokens_seen(d) for _, d in stages[name]) / e:.0f}"
    md = [f"The looped models on the task, through the same curriculum, each at its own rate (seed {RATE_SEED}'s answer loss, "
          "trained for that alone: " +
          '; '.join(f"{n} {grid_md(g)}" for n, g in grids.items()) +
          "), seeds " + ', '.join(map(str, ss)) + ". Exact match at three lookups or more (each "
          "seed's mean over k = 3, 4, 5, then mean +- sd over seeds) against the depth run at test time; the GPTs: " +
          ', '.join(f"{n} {deep_hops({t: r['mean'] for t, r in a.items()}):.3f}" for n, a in gpt.items()) + '.', '']
    for model, control in ((m, c) for m, c in spec['controls'].items() if m in acc and c in acc):
        knob = spec['knob'][model]
        md += [f"Parameters (paper convention / non-embedding), FLOPs per token at the training depth, tokens per "
               f"non-embedding parameter (curriculum and task, seed {ss[0]}): {size(model)}; {size(control)}.", '',
               f"| {knob} | {run[model]} | {run[control]} | {model} - {control} | {TESTS_HEAD} | verdict |",
               '|---|---|---|---|---|---|']
        verdicts = {}
        for v in spec['sweep']:
            a, b = acc[model][v][DEEP], acc[control][v][DEEP]
            verdicts[v] = verdict(a, b, higher=True)
            md.append(f"| {v} | {a['mean']:.3f} +- {a['sd']:.3f} | {b['mean']:.3f} +- {b['sd']:.3f} | "
                      f"{a['mean'] - b['mean']:+.3f} | {tests_cell(a, b)} | {verdicts[v]} |")
        md += ['', pair_line(model, control, knob, verdicts, len(ss)), '']
    return md


def pair_line(model, control, knob, verdicts, n):
    """A looped pair's verdicts in one line, the test-time depths grouped by verdict (its word before the
    colon, 'run higher' naming the control), as the gate's bold line sums up its table."""
    groups = {}
    for v, word in verdicts.items():
        groups.setdefault(word.split(':')[0].replace('run higher', f'{control} ahead'), []).append(str(v))
    return (f"**{model} against {control}** ({n} seeds a side, exact match at three lookups or more): " +
            '; '.join(f"{word} at {knob} {', '.join(vs)}" for word, vs in groups.items()) + '.')


def depth_unread_md(unread, grids, best):
    """A line per pair a side of which read no listing at any rate: not decidable on this task."""
    md = []
    for model, control in PAPERS['depth']['controls'].items():
        names = [n for n in (model, control) if n in unread]
        if names:
            md += [f"**{model} against {control}: not decidable on this task.** {unread_line(names, grids)}" +
                   ''.join(f"; {alone_line(n, grids, best)}" for n in (model, control) if alone(n, best)) + '.', '']
    return md


def alone_line(name, grids, best):
    """Why a side that read the listing trained no reported seeds: the other side of its pair read it at no rate."""
    return (f"{name} read the listing (seed {RATE_SEED}'s answer loss {grid_md(grids[name])}; its rate "
            f"{best[name]:g}), but {partner(name)} at no rate, so {name}'s reported seeds were not trained: they "
            "decide nothing alone")


def unread_line(names, grids):
    """Why runs that read no listing at any rate decide nothing: their one-hop answer loss per rate, at chance."""
    from battery import CHANCE
    return '; '.join(f"{n} ended its one-hop stages (seed {RATE_SEED}, {STAGE_REPEATS + 1} passes) at " +
                     ', '.join(f'{v:.3f} at {lr:g}' for lr, v in grids[n].items()) for n in names) + \
        f": no better than a uniform guess among the listed letters ({-math.log(CHANCE['hop1of1']):.3f}), " \
        "so the listing that every hop looks up was never read, and the curriculum stopped there"


def depth_looped_axes(ax, acc, gpt):
    """Exact match at three lookups or more against test-time depth, mean +- sd over seeds: each looped model
    (solid) and its control (dashed, a little to the right so the bars do not hide each other), the GPTs as lines."""
    spec = PAPERS['depth']
    for i, (model, control) in enumerate((m, c) for m, c in spec['controls'].items() if m in acc and c in acc):
        for name, style, shift in ((model, 'o-', 0.0), (control, 's--', 0.08)):
            ax.errorbar([v + shift for v in spec['sweep']], [acc[name][v][DEEP]['mean'] for v in spec['sweep']],
                        yerr=[acc[name][v][DEEP]['sd'] for v in spec['sweep']], fmt=style, capsize=3,
                        color=f'C{i + 2}', label=f"{name} ({spec['knob'][name]})")
    for i, (name, a) in enumerate(gpt.items()):
        ax.axhline(deep_hops({t: r['mean'] for t, r in a.items()}), color=f'C{i}', ls=':', label=name)
    ax.set(title='exact match at k = 3-5 (3+ lookups), mean +- sd', xlabel='num_recur / rounds / Ts',
           ylabel='exact match', ylim=(0, 1.05))
    ax.legend(fontsize=7)


def depth_figure(acc, grids, best, sweeps):
    """Exact match against the hop count per GPT, and each GPT's rate bracket; where the looped models'
    sweeps are trained or read, a third slot for them."""
    from battery import CHANCE
    _, deep = PAPERS['depth']['runs']
    panels = 3 if sweeps else 2
    fig = plt.figure(figsize=(5.7 * panels, 4))
    ax1, ax2 = fig.add_subplot(1, panels, 1), fig.add_subplot(1, panels, 2)
    ks = [int(t[3:]) for t in acc[deep]]
    for i, name in enumerate(PAPERS['depth']['runs']):
        ax1.errorbar(ks, [acc[name][t]['mean'] for t in acc[name]], [acc[name][t]['sd'] for t in acc[name]],
                     marker='o', capsize=3, color=f'C{i}', label=f'{name} (lr {best[name]:g})')
    ax1.plot(ks, [CHANCE[t] for t in acc[deep]], 'k:', label='chance')
    ax1.set(title='exact match against hops (mean +- sd over seeds)', xlabel='k (pointer lookups)',
            ylabel='exact match', ylim=(0, 1.05))
    ax1.legend(fontsize=8)
    bracket_axes(ax2, grids)
    return fig


def bracket_axes(ax, grids):
    """Each GPT's answer loss against the rate on RATE_SEED, in the gate's colours."""
    for i, name in enumerate(PAPERS['depth']['runs']):
        ax.plot(list(grids[name]), list(grids[name].values()), 'o-', color=f'C{i}', label=name)
    ax.set(title=f'rate bracket (seed {RATE_SEED})', xlabel='learning rate', ylabel='answer loss (val stream)', xscale='log')
    ax.legend(fontsize=8)
