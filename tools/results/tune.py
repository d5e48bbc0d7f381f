"""Each side at its own rate: a paper's runs trained over seeds, a tuned run's rate bracketed first."""
import json
import os

from tools.results.runner import val_curve
from tools.results.spec import rated, seed_list
from tools.results.stats import bracket, mean_sd, ranked


def report_runs(lab, paper, spec, seeds, metric='loss'):
    """Train every run of a paper for every seed; one table row per run: mean +- sd over seeds. A run
    named in spec['tune'] (name -> its config's rate) trains at its own best rate: bracket() from half
    to twice its config's, on its first seed, by the stream score, then every seed at that grid's best
    two rates, the lower mean taken, its schedule ending at spec['floor'] (a tenth unless it says) of
    the rate; a run of spec['tune_as'] (name -> such a run) trains at that run's rate, as an ablation
    shares its model's recipe."""
    tune, head = spec.get('tune', {}), (lambda name: spec.get('tune_as', {}).get(name, name))
    floor = spec.get('floor', 0.1)
    done = {}

    def job(j):   # (name, rate or None: the config's, seed); the stream score right after training, in parallel too
        name, lr, seed = j
        out = lab.run_dir(paper, rated(name, lr), seed)
        args = spec['runs'][name] + ([f'--learning_rate={lr:g}', f'--min_lr={lr * floor:g}'] if lr else [])
        return lab.train(args, out, seed), lab.evaluate(out, '--stream=True')[metric]

    def run_all(jobs):
        lab.run_jobs(job, jobs, done)

    def key(name, lr):   # the config's own rate trains in the run's plain folder
        return None if lr == tune[head(name)] else lr
    first = {name: seed_list(spec, name, seeds)[0] for name in tune}
    run_all([(name, key(name, lr), first[name]) for name, base in tune.items() for lr in (base / 2, base, base * 2)])
    grids, best = {}, {}
    for name, base in tune.items():
        def score(lr, name=name):
            run_all([(name, key(name, lr), first[name])])
            return done[(name, key(name, lr), first[name])][1]
        lrs, _ = bracket((base / 2, base, base * 2), score)
        grids[name] = {lr: score(lr) for lr in lrs}
    # one seed picks a rate beside the edge where another seed stalls (TextNCA's 4e-3, next to 8e-3's
    # divergence): the two best rates of the first seed's grid train every seed, the lower mean wins
    finals = {name: ranked(grid)[:2] for name, grid in grids.items()}
    run_all([(name, key(name, lr), seed) for name, lrs in finals.items() for lr in lrs
             for seed in seed_list(spec, name, seeds)])
    means = {name: {lr: mean_sd([done[(name, key(name, lr), seed)][1] for seed in seed_list(spec, name, seeds)])[0]
                    for lr in lrs} for name, lrs in finals.items()}
    best.update({name: ranked(m)[0] for name, m in means.items()})

    def lr_of(name):
        return key(name, best[head(name)]) if head(name) in best else None

    def others_pick(name, seed):   # the finalist the other seeds' mean picks: a rate this seed's loss did not choose
        others = [s for s in seed_list(spec, name, seeds) if s != seed]
        return ranked({lr: mean_sd([done[(name, key(name, lr), s)][1] for s in others])[0] for lr in finals[name]})[0]

    def off_seed(name, ss):
        """Each seed's rate chosen on the other seeds alone, and its value there (None where that run was not
        trained: an ablation trains at its model's rate only)."""
        lrs = [others_pick(head(name), s) for s in ss]
        got = [done.get((name, key(name, lr), s)) for lr, s in zip(lrs, ss)]
        return {'lrs': [f'{lr:g}' for lr in lrs], 'losses': None if None in got else [g[1] for g in got]}

    run_seeds = {name: seed_list(spec, name, seeds) for name in spec['runs']}
    run_all([(name, lr_of(name), seed) for name in spec['runs'] for seed in run_seeds[name]])
    rows, curves = [], {}
    for name in spec['runs']:
        ss, lr = run_seeds[name], lr_of(name)
        losses = [done[(name, lr, seed)][1] for seed in ss]
        curves[name] = [val_curve(lab.run_dir(paper, rated(name, lr), seed)) for seed in ss]
        cfg = json.load(open(os.path.join(lab.run_dir(paper, rated(name, lr), ss[0]), 'config.json')))
        m, sd = mean_sd(losses)
        rows.append({'run': name, 'model': cfg['model'], 'seeds': ss, 'losses': losses, 'mean': m, 'sd': sd,
                     'seconds': sum(done[(name, lr, seed)][0] for seed in ss),
                     'dirs': [lab.run_dir(paper, rated(name, lr), seed) for seed in ss],
                     **({'lr': cfg['learning_rate']} if head(name) in best else {}),
                     **({'off_seed': off_seed(name, ss)} if head(name) in finals and len(ss) > 1 else {}),
                     **({'grid': {f'{r:g}': v for r, v in grids[name].items()},
                         'finals': {f'{r:g}': v for r, v in means[name].items()}} if name in grids else {})})
    return rows, curves
