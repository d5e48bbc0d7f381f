"""
Each paper's claim at a scale a CPU can run: tiny Shakespeare characters, the CPU demo recipe
(config/recipe/shakespeare_char.py), minutes to about half an hour per paper on 2 cores. One command
per paper trains the few models its claim needs (train.py runs under out-results/<paper>/; a finished
run is reused, a killed one resumed), scores them with eval.py on the whole validation stream and
writes results/<paper>.md (the table) and results/<paper>.png (the curves).

    python prepare_data.py shakespeare_char      # offline: --input path/to/input.txt
    python results.py textnca                    # staged vs reversed vs uniform windows, GPT, Ts sweep
    python results.py parcae                     # Parcae vs RDM over learning rates, num_recur sweep, GPT
    python results.py workspace                  # workspace vs anchored loop vs GPT, three seeds
    python results.py fon                        # length extrapolation; infill vs drafting-only and GPT

--seeds=N overrides a paper's seed count, --iters=N its iterations (for a quick look, not the table).
Two runs train at once, one thread each; the wall times in the tables are theirs.
"""
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt

ROOT = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable

# A paper: its runs (name -> train.py arguments), the seeds each is trained with, and what to report.
CHAR = ['config/recipe/shakespeare_char.py', '--eval_interval=100', '--max_iters=1000', '--lr_decay_iters=1000',
        '--learning_rate=2e-3', '--min_lr=2e-4']
GPT6_84 = CHAR + ['--model=gpt', '--n_layer=6', '--n_embd=84', '--n_head=4']   # 0.53M, TextNCA demo 0.51M
PAPERS = {
    'textnca': {
        'claim': 'Table 2: the staged narrow-to-wide window schedule beats reversed and uniform ones; '
                 'Hier-TextNCA ends near a parameter-matched Transformer (paper: 60.3 vs 52.8 PPL, 3% in loss)',
        'seeds': 2,
        'runs': {
            'staged (4, 16, 64)': ['config/cpu_textnca.py', '--eval_interval=100'],
            'reversed (64, 16, 4)': ['config/cpu_textnca.py', '--eval_interval=100', '--windows=(64, 16, 4)'],
            'uniform (16, 16, 16)': ['config/cpu_textnca.py', '--eval_interval=100', '--windows=(16, 16, 16)'],
            'GPT 6L d84': GPT6_84,
        },
        'sweep': ('staged (4, 16, 64)', 'Ts=1,2,3,4,6'),
    },
}


def run_dir(paper, name, seed):
    slug = '_'.join(''.join(c if c.isalnum() else ' ' for c in name).split())
    return os.path.join('out-results', paper + (f'-iters{ITERS}' if ITERS else ''), f'{slug}-s{seed}')


def read_log(out):
    path = os.path.join(out, 'log.jsonl')
    return [json.loads(line) for line in open(path)] if os.path.isfile(path) else []


def train(args, out, seed, iters):
    """One train.py run into out; a finished one is kept, a killed one resumed. Returns its wall time."""
    extra = [f'--max_iters={iters}', f'--lr_decay_iters={iters}'] if iters else []
    if os.path.isfile(os.path.join(out, 'done.json')):
        return json.load(open(os.path.join(out, 'done.json')))['seconds']
    init = ['--init_from=resume'] if os.path.isfile(os.path.join(out, 'ckpt.pt')) else []
    cmd = [PY, 'train.py', *args, f'--out_dir={out}', f'--seed={seed}', '--always_save_checkpoint=True', *extra, *init]
    print(' '.join(cmd[1:]), flush=True)
    t0 = time.time()
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, env={**os.environ, 'OMP_NUM_THREADS': '1'})
    seconds = time.time() - t0
    json.dump({'seconds': seconds, 'command': ' '.join(cmd[1:])}, open(os.path.join(out, 'done.json'), 'w'))
    return seconds


def evaluate(out, *args):
    """eval.py on a run (the whole val stream unless args say otherwise); returns its JSON."""
    dest = os.path.join(out, 'eval')
    subprocess.run([PY, 'eval.py', f'--out_dir={out}', f'--out={dest}', *args], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    name = next(a for a in args if a.startswith('--sweep='))[8:].split('=')[0] if any(
        a.startswith('--sweep=') for a in args) else None
    return json.load(open(os.path.join(dest, f'sweep_{name}.json' if name else 'stream_val.json')))


def mean_sd(xs):
    m = sum(xs) / len(xs)
    return m, (math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else float('nan'))


def val_curve(out):
    return [(r['iter'], r['val_loss']) for r in read_log(out) if r.get('kind') == 'eval']


def report_runs(paper, spec, seeds, iters):
    """Train every run of a paper for every seed; one table row per run: mean +- sd over seeds."""
    jobs = [(name, seed) for name in spec['runs'] for seed in range(1337, 1337 + seeds)]
    with ThreadPoolExecutor(JOBS) as pool:   # JOBS runs at once, one thread each
        secs = dict(zip(jobs, pool.map(lambda j: train(spec['runs'][j[0]], run_dir(paper, *j), j[1], iters), jobs)))
    rows, curves = [], {}
    for name, args in spec['runs'].items():
        losses = []
        for seed in range(1337, 1337 + seeds):
            out = run_dir(paper, name, seed)
            losses.append(evaluate(out, '--stream=True')['loss'])
            curves.setdefault(name, []).append(val_curve(out))
        secs_run = sum(secs[(name, seed)] for seed in range(1337, 1337 + seeds))
        cfg = json.load(open(os.path.join(run_dir(paper, name, 1337), 'config.json')))
        m, sd = mean_sd(losses)
        rows.append({'run': name, 'model': cfg['model'], 'losses': losses, 'mean': m, 'sd': sd, 'seconds': secs_run})
    return rows, curves


def textnca(seeds, iters):
    spec = PAPERS['textnca']
    rows, curves = report_runs('textnca', spec, seeds, iters)
    target, knob = spec['sweep']
    sweep = evaluate(run_dir('textnca', target, 1337), f'--sweep={knob}')
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for i, (name, runs) in enumerate(curves.items()):
        for j, c in enumerate(runs):
            if c:
                ax1.plot(*zip(*c), 'o-' if j == 0 else 's--', color=f'C{i}', ms=3, lw=1,
                         label=name if j == 0 else None)
    ax1.axhline(UNIGRAM, color='gray', ls=':', label=f'unigram {UNIGRAM:.2f}')
    ax1.set(title='tiny Shakespeare val loss (each seed)', xlabel='iteration', ylabel='nats / char')
    ax1.legend(fontsize=8)
    ax2.plot(sweep['values'], sweep['loss'], 'o-')
    ax2.set(title=f'{target}: inference-time Ts (trained Ts = 2)', xlabel="Ts'", ylabel='val loss (eval set)')
    ax2.set_yscale('log')
    sweep_md = ' | '.join(f"Ts'={v}: {l:.3f}" for v, l in zip(sweep['values'], sweep['loss']))
    return rows, fig, f"Inference-time Ts sweep of `{target}` seed 1337 (trained Ts = 2): {sweep_md}"


JOBS = 2         # train.py runs at once (2 cores)
ITERS = 0        # --iters: a quick look in its own folder, never mixed with the full runs
UNIGRAM = 3.31   # tiny Shakespeare's unigram entropy, nats per character (MEASUREMENTS.md)


def write(paper, rows, fig, extra, seeds):
    os.makedirs(os.path.join(ROOT, 'results'), exist_ok=True)
    fig.tight_layout()
    fig.savefig(os.path.join(ROOT, 'results', f'{paper}.png'), dpi=80)
    lines = [f"# {paper}: {PAPERS[paper]['claim']}", '',
             f"Tiny Shakespeare characters, whole validation stream (eval.py --stream=True), {seeds} seed(s) from 1337. "
             f"Command: `python results.py {paper}`.", '',
             '| run | model | val loss (mean +- sd) | per seed | train wall time |', '|---|---|---|---|---|']
    for r in rows:
        sd = '' if math.isnan(r['sd']) else f" +- {r['sd']:.3f}"
        lines.append(f"| {r['run']} | {r['model']} | {r['mean']:.3f}{sd} | "
                     f"{', '.join(f'{x:.3f}' for x in r['losses'])} | {r['seconds'] / 60:.1f} min |")
    lines += ['', extra, '']
    open(os.path.join(ROOT, 'results', f'{paper}.md'), 'w').write('\n'.join(lines))
    json.dump(rows, open(os.path.join(ROOT, 'results', f'{paper}.json'), 'w'), indent=1)
    print('\n'.join(lines))


def main(argv):
    opts = dict(a[2:].split('=', 1) for a in argv if a.startswith('--') and '=' in a)
    papers = [a for a in argv if not a.startswith('--')]
    if len(papers) != 1 or papers[0] not in PAPERS or set(opts) - {'seeds', 'iters'}:
        sys.exit(f"usage: python results.py {{{'|'.join(PAPERS)}}} [--seeds=N] [--iters=N]")
    paper = papers[0]
    if not os.path.isfile(os.path.join(ROOT, 'data', 'shakespeare_char', 'train.bin')):
        sys.exit("no data/shakespeare_char: run python prepare_data.py shakespeare_char first")
    global ITERS
    seeds, ITERS = int(opts.get('seeds', PAPERS[paper]['seeds'])), int(opts.get('iters', 0))
    rows, fig, extra = globals()[paper](seeds, ITERS)
    write(paper, rows, fig, extra, seeds)


if __name__ == '__main__':
    main(sys.argv[1:])
