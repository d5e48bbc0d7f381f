"""
Each paper's claim at a scale a CPU can run: tiny Shakespeare characters (bytes for the workspace, the
synthetic battery for FON's Table 8), the CPU demos' recipes (the runs are config/results/<paper>/*.py),
from ten minutes to a few hours per paper on 2 cores. One command per paper trains the
models its claim needs (train.py runs under out-results/<paper>/; a finished run is reused, a killed one
resumed), scores them with eval.py on the whole validation stream and writes results/<paper>.md (the
tables) and results/<paper>.png (the curves).

    python prepare_data.py shakespeare_char      # offline: --input path/to/input.txt
    python prepare_data.py shakespeare --tokenizer byte   # the workspace's bytes (offline: the same --input)
    python prepare_data.py synthetic             # the battery (offline)
    python -m tools.results textnca     # ~80 min: schedules, SWin-TF-Staged/6L, Transformer-6L, Ts sweep, Eq. 1
    python -m tools.results parcae      # ~110 min: Table 2 with the base RDM; Parcae vs GPT 6L/12L and mu=1 on
                                        # Table 21's recipe, on characters and the battery; L(T) forms;
                                        # Parcae vs GPT 6L at a second size (40 of the 110)
    python -m tools.results workspace   # ~2.5-3 h: Table 3's six rows, seeds 11/23/37, bits per byte, each at
                                        # its own rate, at two sizes (100 runs, 302 CPU-minutes of training)
    python -m tools.results fon         # FON vs Mamba2 vs Transformers at two sizes, each at its own rate, the
                                        # tied head, length extrapolation (~5 CPU-hours), then Table 5's infill
                                        # arms, three seeds (~4 CPU-hours more: 2.6 training, 1.5 reading)
    python -m tools.results battery     # ~45 min: Table 8 with a BERT-style encoder, far future tasks, Table 5's
                                        # arms on ind_r and mem_r, three seeds
    python -m tools.results depth       # the depth gate: GPT 3L vs 6L on the hops task, rates bracketed (a run
                                        # 62-91 min 3L, 63-156 min 6L with its repeated stages: ~19 CPU-hours);
                                        # once it holds, the looped models' depth sweeps (Parcae's pair 18
                                        # CPU-hours, the workspace's 13; TextNCA's, which never
                                        # reads the listing, stops after its one-hop stages: 2.4)

--seeds=N overrides a paper's seed count, --iters=N its iterations (for a quick look, not the table).
Two runs train at once, one thread each (--jobs=N: N at once, one a core); the wall times in the tables
are theirs, so time them at one job a core. Ctrl-C, a SIGTERM or a run that fails stops every run the
command started and starts no other; the same command resumes each from its last checkpoint.

Every finished run leaves a record in results/runs/<paper>/ (its config, log, eval readings and
command; no checkpoint), committed with the tables: in a fresh clone the command rebuilds each table
from the records and trains only the runs they lack (a run whose checkpoint another needs is trained
again from its record's arguments, to the same weights at one thread). --fresh ignores the records
and trains every run out-results/ lacks; delete a record to train that run again.
"""
import contextlib
import gzip
import json
import math
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
import matplotlib.ticker
from PIL import Image   # matplotlib's own dependency
import torch

from battery import DATASETS, UP_TO
from models import build_model
from tools.report import replace_with, write_text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # the repo
PY = sys.executable

# A paper: its runs (name -> train.py arguments: a config file of config/results/<paper>/ and the one or two
# values a sweep varies), the seeds each is trained with, and what to report.
CFG = 'config/results/'
# Parcae's Table 2 at CPU scale: Parcae, the RDM with and without residual normalisation and the GPT (the
# rise metric's noise floor: nothing loops there) on the RDM's Adam (Q.1), one seed at each of these rates
PARCAE_ADAM_LRS = (2e-3, 6e-3, 2e-2)
STABILITY = (('Parcae', 'parcae'), ('RDM, res. norm', 'rdm'), ('RDM, base', 'rdm_base'), ('GPT 6L', 'gpt'))
# Section 5.1 on its own recipe (Table 21: muon.py): the GPT 6L's and Parcae's rates start here and widen by 2x
# at an edge until each one's best lies inside (the paper takes Parcae at the GPT's; here each side has its own);
# the GPT 12L trains at the GPT 6L's rate and Parcae mu=1 at Parcae's
PARCAE_MUON_LRS = (4e-3, 8e-3, 1.6e-2)
PARCAE_TUNED = ('GPT 6L', 'Parcae')
# FON (config/results/fon/fon.py) and 4-layer GPTs of its recipe (gpt.py) with learned, RoPE and ALiBi positions;
# hole fine-tuning (holes.py) read after the pretraining run's config
HOLES = [CFG + 'fon/holes.py']
PAPERS = {
    'textnca': {
        'claim': 'Table 2: the staged narrow-to-wide schedule beats reversed, uniform and non-monotone ones, and a '
                 'non-iterating sliding-window Transformer with the same schedule (SWin-TF-Staged) comes within '
                 '+4.1 PPL of it; Table 7: a from-scratch Ts sweep is U-shaped with its optimum at Ts = 4; '
                 'Table 3: Hier-TextNCA does not match the Transformer-6L (60.3 vs 52.8 PPL)',
        'seeds': 3,
        'seeds_by_run': {'Ts=8': 1, 'staged, emb_scale 1 (Eq. 1 literally)': 1},
        'runs': {   # the paper's schedules and controls scaled to block 128 (config/results/textnca/*.py)
            'staged (2, 8, 32)': [CFG + 'textnca/textnca.py'],
            'reversed (32, 8, 2)': [CFG + 'textnca/textnca.py', '--windows=(32, 8, 2)'],
            'uniform (8, 8, 8)': [CFG + 'textnca/textnca.py', '--windows=(8, 8, 8)'],
            'non-monotone (2, 32, 8)': [CFG + 'textnca/textnca.py', '--windows=(2, 32, 8)'],
            'SWin-TF-Staged (2, 2, 8, 8, 32, 32)': [CFG + 'textnca/gpt.py', '--windows=(2, 2, 8, 8, 32, 32)'],
            'SWin-TF-6L (w = 32)': [CFG + 'textnca/gpt.py', '--windows=32'],
            'Transformer-6L d96': [CFG + 'textnca/gpt.py'],
            'Transformer-6L d84 (parameter-matched)': [CFG + 'textnca/gpt.py', '--n_embd=84', '--d_ff=336'],
            **{f'Ts={k}': [CFG + 'textnca/textnca.py', f'--Ts={k}'] for k in (2, 6, 8)},
            'staged, emb_scale 1 (Eq. 1 literally)': [CFG + 'textnca/textnca.py', '--emb_scale=1.0'],
        },
        'sweep': ('staged (2, 8, 32)', 'Ts=1,2,3,4,6'),
        # the headline pairs again at d 48 for 4,500 iterations: 20-27 tokens per parameter (the first size: 1.5)
        'small': {'seeds': 3, 'runs': {
            'staged (2, 8, 32)': [CFG + 'textnca/small.py'],
            'SWin-TF-Staged (2, 2, 8, 8, 32, 32)': [CFG + 'textnca/gpt_small.py', '--windows=(2, 2, 8, 8, 32, 32)'],
            'Transformer-6L': [CFG + 'textnca/gpt_small.py']},
            'tune': {'staged (2, 8, 32)': 2e-3, 'SWin-TF-Staged (2, 2, 8, 8, 32, 32)': 2e-3, 'Transformer-6L': 2e-3}},
        # each side of the headline comparisons at its own rate; the ablations at their model's
        'tune': {'staged (2, 8, 32)': 2e-3, 'SWin-TF-Staged (2, 2, 8, 8, 32, 32)': 2e-3, 'Transformer-6L d96': 2e-3,
                 'Transformer-6L d84 (parameter-matched)': 2e-3},
        'tune_as': {**{name: 'staged (2, 8, 32)' for name in ('reversed (32, 8, 2)', 'uniform (8, 8, 8)',
                                                             'non-monotone (2, 32, 8)', 'Ts=2', 'Ts=6', 'Ts=8',
                                                             'staged, emb_scale 1 (Eq. 1 literally)')},
                    'SWin-TF-6L (w = 32)': 'SWin-TF-Staged (2, 2, 8, 8, 32, 32)'},
    },
    'parcae': {
        'claim': 'Table 2: the RDM diverges or spikes as the learning rate grows where Parcae stays stable '
                 '(spectral radius < 1); Table 5: Parcae beats the parameter-matched Transformer on the paper\'s '
                 'recipe (Table 21); section 5.3 / Table 12: test-time depth follows L(T) = L_inf + Z exp(-z T), '
                 'better than three other forms when fit on T <= mu_rec and extrapolated',
        'seeds': 3,
        'runs': {f'{m}, Adam lr {lr:g}': [CFG + f'parcae/{f}.py', f'--learning_rate={lr}']
                 for lr in PARCAE_ADAM_LRS for m, f in STABILITY},
        # the depth design: the parameter-matched GPT, the FLOPs-matched depth ceiling, Parcae, Parcae at
        # fixed depth 1; each in two settings (the recipe and the data after the model's config)
        'depth': {'GPT 6L': 'gpt', 'GPT 12L': 'gpt_12l', 'Parcae': 'parcae', 'Parcae mu=1': 'parcae_mu1'},
        'settings': {'Shakespeare': [CFG + 'parcae/muon.py'],
                     'battery': [CFG + 'parcae/muon.py', CFG + 'parcae/battery.py']},
        'datasets': [('shakespeare_char', 'shakespeare_char'), ('synthetic', 'synthetic')],   # both settings'
        'mu': 4,     # Parcae's mean_recurrence (cpu_parcae.py)
        'sweep': 'num_recur=1..12',
        # Section 5.1's pair again at d 48 for 4,500 iterations on Shakespeare: 20 tokens per non-embedding
        # parameter (the first size: 0.38), each at its own Muon rate, the cooldown to 0 as Table 21's
        'small': {'seeds': 3, 'floor': 0.0, 'runs': {
            'GPT 6L': [CFG + 'parcae/gpt_small.py', CFG + 'parcae/muon_small.py'],
            'Parcae': [CFG + 'parcae/parcae_small.py', CFG + 'parcae/muon_small.py']},
            'tune': {'GPT 6L': 8e-3, 'Parcae': 8e-3}},
    },
    'workspace': {
        'claim': 'Table 3: at matched parameters (the 0.918M rows, 0.832M at block 128) the causal workspace beats '
                 'the plain Transformer, the fixed shared loop, the adaptive-exit mixture, the anchored shared loop '
                 'and the anchored conditioned-dense loop, in bits per byte',
        'seeds': 3,
        'seed_labels': (11, 23, 37),   # the paper's
        'data': 'Tiny Shakespeare bytes (257 symbols, non-overlapping blocks without replacement)',
        'datasets': [('shakespeare_byte', 'shakespeare --tokenizer byte')],
        'metric': 'bits per byte',
        'runs': {   # Table 3's six rows in its order
            'GPT 4L': [CFG + 'workspace/gpt.py'],
            'fixed shared loop': [CFG + 'workspace/shared_loop.py'],
            'adaptive exit': [CFG + 'workspace/adaptive_exit.py'],
            'anchored shared loop': [CFG + 'workspace/anchored.py'],
            'conditioned dense': [CFG + 'workspace/conditioned_dense.py'],
            'workspace': [CFG + 'workspace/workspace.py'],
        },
        'tune': {name: 2e-3 for name in ('GPT 4L', 'fixed shared loop', 'adaptive exit', 'anchored shared loop',
                                         'conditioned dense', 'workspace')},   # each at its own rate
        # the six rows again at 3/8 of the width for 2,700 iterations: 21-24 bytes per non-embedding parameter (the
        # first size: 1.3-1.4)
        'small': {'seeds': 3, 'seed_labels': (11, 23, 37), 'runs': {
            name: [CFG + f'workspace/{f}_small.py'] for name, f in (
                ('GPT 4L', 'gpt'), ('fixed shared loop', 'shared_loop'), ('adaptive exit', 'adaptive_exit'),
                ('anchored shared loop', 'anchored'), ('conditioned dense', 'conditioned_dense'),
                ('workspace', 'workspace'))},
            'tune': {name: 2e-3 for name in ('GPT 4L', 'fixed shared loop', 'adaptive exit', 'anchored shared loop',
                                             'conditioned dense', 'workspace')}},
    },
    'fon': {
        'claim': 'Table 2: at matched parameters FON reaches a lower loss than Mamba2 and the Transformer (paper: '
                 '131.0 vs 152.5 vs 197.7 PPL); Sec. 4.3: trained at T, FON degrades little at 8T without position '
                 'engineering (paper: +8-9%, between ALiBi +2.6% and RoPE +18.6%); Table 5: hole fine-tuned FON-PC '
                 'fills holes better than its drafting-only (AR) self and the causal Transformer',
        'seeds': 1,
        # the headline, the tie, and the infill arms' pretrainings (each arm fine-tunes every seed of its own)
        'seeds_by_run': {'FON PC': 3, 'Mamba2': 3, 'GPT RoPE': 3, 'GPT ALiBi': 3, 'FON PC untied': 3, 'FON AR/OD': 3,
                         'GPT learned': 3},
        'runs': {
            'FON PC': [CFG + 'fon/fon.py'],
            'Mamba2': [CFG + 'fon/mamba2.py'],
            'GPT learned': [CFG + 'fon/gpt.py', '--pos=learned', '--n_positions=1024'],
            'GPT RoPE': [CFG + 'fon/gpt.py', '--pos=rope'],
            'GPT ALiBi': [CFG + 'fon/gpt.py', '--pos=alibi'],
            'FON PC untied': [CFG + 'fon/fon.py', '--tie_weights=False'],
            'FON PC, h_0 x sqrt(d)': [CFG + 'fon/fon.py', f'--emb_scale={128 ** 0.5:.6f}'],
            # without holes OD runs no revision, as AR: one drafting-only pretraining serves both arms
            'FON AR/OD': [CFG + 'fon/fon.py', '--coupling=AR'],
        },
        'tune': {name: 2e-3 for name in ('FON PC', 'Mamba2', 'GPT RoPE', 'GPT ALiBi')},   # Table 2's, each at its own rate
        # the infill arms' pretrainings at their model's rate
        'tune_as': {'FON AR/OD': 'FON PC', 'GPT learned': 'GPT RoPE', 'FON PC untied': 'FON PC',
                    'FON PC, h_0 x sqrt(d)': 'FON PC'},
        # Table 2's four again at d 64 for 3,000 iterations: 20-21 tokens per parameter (the first size: 2.6)
        'small': {'seeds': 1, 'seeds_by_run': {name: 3 for name in ('FON PC', 'Mamba2', 'GPT RoPE', 'GPT ALiBi')},
                  'runs': {'FON PC': [CFG + 'fon/fon_small.py'], 'Mamba2': [CFG + 'fon/mamba2_small.py'],
                                       'GPT RoPE': [CFG + 'fon/gpt_small.py', '--pos=rope'],
                                       'GPT ALiBi': [CFG + 'fon/gpt_small.py', '--pos=alibi']},
                  'tune': {name: 2e-3 for name in ('FON PC', 'Mamba2', 'GPT RoPE', 'GPT ALiBi')}},
        # Table 5's arms, each hole fine-tuned from every seed of its own pretraining (name: the pretrained run
        # it starts from, what follows its arguments), read after each leg of the fine-tuning
        'finetune': {
            'FON PC + holes': ('FON PC', HOLES),
            'FON OD + holes': ('FON AR/OD', HOLES + ['--coupling=OD']),
            'FON AR + holes': ('FON AR/OD', HOLES + ['--coupling=AR']),
            # PC's pretraining with OD's coupling in the fine-tuning: does PC's gain come from its pretraining?
            'FON PC then OD + holes': ('FON PC', HOLES + ['--coupling=OD']),
            'GPT learned + holes': ('GPT learned', HOLES),
        },
        'ft_lr': 1 / 3,    # Sec. 7: hole fine-tuning at a constant third of the pretraining's rate (1e-4 after 3e-4)
        # legs of one constant-rate run, trained until every seed of every arm in 'must_pass' fills above its own
        # pretraining's LM prior at a leg of at least 'least' iterations, or to the last leg (1,500 left PC below)
        'legs': (250, 750, 1500, 2500, 4000, 6000),
        'least': 2000,
        # the arms whose fill reads past the hole; AR and the causal GPT read the prefix only, so their LM prior is
        # their ceiling, not a mark they can be asked to pass
        'must_pass': ('FON PC + holes', 'FON OD + holes', 'FON PC then OD + holes'),
    },
    'depth': {
        'claim': 'the gate of every depth claim (Parcae\'s test-time depth, the workspace\'s rounds, TextNCA\'s Ts): '
                 'on a task whose answer is k sequential lookups away, a 6-layer GPT beats a 3-layer one where three or '
                 'more lookups are needed (k = 3, 4, 5 on the 8-cycle)',
        'seeds': 3,
        'data': "battery.py's hops (hop1 ... hop6: a random 8-cycle of letters listed as pairs, the answer k steps "
                "along it; eight queries a listing, each its own letter and k, loss on the answers only, the first "
                "answer scored)",
        'datasets': [('hops', 'hops')] + [(f'hops{n}', f'hops{n}') for n in UP_TO],
        'metric': 'answer loss',
        'runs': {'GPT 3L': [CFG + 'depth/gpt_3l.py'], 'GPT 6L': [CFG + 'depth/gpt_6l.py']},
        'stage': [CFG + 'depth/stage.py'],     # the curriculum: hop counts 1 ... N for N = 1 ... 5, then the task
        # once the gate holds: each looped model at the GPT 3L's width and the 6L's depth, and its control trained at
        # depth 1 (the loop run once), read at each test-time depth of 'sweep' through its knob
        'looped': {'Parcae': [CFG + 'depth/parcae.py'],
                   'Parcae mu=1': [CFG + 'depth/parcae.py', '--mean_recurrence=1', '--mean_backprop_depth=1',
                                   '--depth_sampling=fixed'],
                   'workspace': [CFG + 'depth/workspace.py'],
                   'workspace R=1': [CFG + 'depth/workspace.py', '--n_rounds=1'],
                   'TextNCA': [CFG + 'depth/textnca.py'],
                   'TextNCA Ts=1': [CFG + 'depth/textnca.py', '--Ts=1']},
        # each control's rate bracketed as its model's: Parcae at 4e-3 did not learn one hop in three passes, so a
        # control at a rate picked for its model could lose to the rate, not to the depth
        'controls': {'Parcae': 'Parcae mu=1', 'workspace': 'workspace R=1', 'TextNCA': 'TextNCA Ts=1'},
        'knob': {'Parcae': 'num_recur', 'Parcae mu=1': 'num_recur', 'workspace': 'rounds', 'workspace R=1': 'rounds',
                 'TextNCA': 'Ts', 'TextNCA Ts=1': 'Ts'},
        'sweep': (1, 2, 3, 4, 6, 8),
    },
    'battery': {
        'claim': 'Table 8: in fill mode FON fills where the causal Transformer fails; the bidirectional encoder is the '
                 'fill ceiling; on future-dependent tasks a causal reader is at chance',
        'seeds': 3,
        'data': 'The synthetic skill battery (battery.py: 16 tasks, characters, block 96; its val stream)',
        'datasets': [('synthetic', 'synthetic')],
        'metric': 'val loss (the bidirectional GPT: at the answer holes)',
        'runs': {   # d 64, L 2 each (config/fon/fon_cpu_battery.py), pretrained 400 iterations
            'FON PC': [CFG + 'battery/fon.py'],
            'GPT causal': [CFG + 'battery/gpt.py'],
            'GPT bidirectional (causal=False)': [CFG + 'battery/gpt_bidirectional.py'],
            'Mamba2': [CFG + 'battery/mamba2.py'],
            # without holes OD runs no revision, as AR: the drafting-only pretraining of the OD arm
            'FON AR/OD': [CFG + 'battery/fon.py', '--coupling=AR'],
        },
        # hole fine-tuning, 2000 iterations (config/fon/fon_cpu_battery_ft.py), from the same seed's pretrained run
        'finetune': {**{f'{name} + holes': (name, [CFG + 'battery/holes.py'])
                        for name in ('FON PC', 'GPT causal', 'GPT bidirectional (causal=False)', 'Mamba2')},
                     'FON OD + holes': ('FON AR/OD', [CFG + 'battery/holes.py', '--coupling=OD']),
                     'FON PC then OD + holes': ('FON PC', [CFG + 'battery/holes.py', '--coupling=OD'])},
        # Table 5's arms on the two tasks where FON's fill left the causal readers' chance: PC against each
        'arms': ('FON PC + holes', 'FON OD + holes', 'FON PC then OD + holes'),
        'arm_tasks': ('ind_r', 'mem_r'),
    },
}


def run_dir(paper, name, seed):
    slug = '_'.join(''.join(c if c.isalnum() else ' ' for c in name).split())
    return os.path.join('out-results', paper + (f'-iters{ITERS}' if ITERS else ''), f'{slug}-s{seed}')


def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def read_log(out):
    path = os.path.join(out, 'log.jsonl')
    if os.path.exists(path) and not os.path.isfile(path):
        fail(f"{path} is not a file: a run's log is the file train.py appends to; move that aside")
    return [json.loads(line) for line in open(path)] if os.path.isfile(path) else []


def init_source(args):
    """The run whose weights train.py arguments start from (--init_from, not resume); None: from scratch."""
    return next((a[len('--init_from='):] for a in args if a.startswith('--init_from=') and a != '--init_from=resume'),
                None)


def trained_otherwise(out, args):
    """How the finished run in out differs from the one args ask for: other starting weights (--init_from)
    or another rate (--learning_rate), where args name them; None where it is that run, or there is none."""
    path = os.path.join(out, 'done.json')
    if not os.path.isfile(path):
        return None
    done = json.load(open(path))
    argv = done.get('argv') or done['command'].split()
    src = init_source(args)
    if src is not None and f'--init_from={src}' not in argv:
        return f'from another run than {src}'
    asked, had = (next((a for a in reversed(v) if a.startswith('--learning_rate=')), None) for v in (args, argv))
    if asked is not None and asked != had:
        return f"at another rate than {asked[len('--learning_rate='):]}"
    return None


def train(args, out, seed, iters, upto=None):
    """One train.py run into out; a finished one is kept, a killed one resumed. upto: train (or
    continue a finished run) to that iteration, a leg of a run read along the way. Returns its wall time."""
    extra = [f'--max_iters={iters}', f'--lr_decay_iters={iters}'] if iters else []
    extra += [f'--max_iters={upto}'] if upto else []
    done_path = os.path.join(out, 'done.json')
    restore(out, args)
    how = trained_otherwise(out, args)    # a repeated depth stage, a retrained pretraining, a recipe changed
    if how:
        fail(f'{out} was trained {how}: move it aside to train it again as asked')
    done = json.load(open(done_path)) if os.path.isfile(done_path) else None
    if done and (upto is None or done.get('upto', 0) >= upto):
        keep(out)
        return done['seconds']
    ckpt, started = os.path.join(out, 'ckpt.pt'), os.path.join(out, 'started.json')
    if init_source(args) and not done and not os.path.isfile(ckpt):    # starts from another run's weights: a
        ensure_ckpt(init_source(args))                                    # recorded one is trained again for them
    if done:          # a finished leg continued: its checkpoint
        ensure_ckpt(out)
    init = ['--init_from=resume'] if os.path.isfile(ckpt) else []
    prior = done['seconds'] if done else 0
    if init and not done and os.path.isfile(started):   # a killed run: its time up to its last checkpoint counts
        s = json.load(open(started))
        prior = s['prior'] + max(0.0, os.path.getmtime(ckpt) - s['t0'])
    cmd = [PY, 'train.py', *args, f'--out_dir={out}', f'--seed={seed}', '--always_save_checkpoint=True', *extra, *init]
    print(' '.join(cmd[1:]), flush=True)
    t0 = time.time()
    os.makedirs(out, exist_ok=True)
    write_text(started, json.dumps({'t0': t0, 'prior': prior}))
    run_with_progress(cmd, out)
    seconds = time.time() - t0 + prior
    write_text(done_path, json.dumps({'seconds': seconds, 'command': ' '.join(cmd[1:]), 'argv': cmd[1:],
                                      **({'upto': upto} if upto else {})}))
    keep(out)
    return seconds


RECORDS = os.path.join('results', 'runs')   # every finished run's record: all but its checkpoint
FRESH = False                               # --fresh: train what out-results/ lacks, records unread


def record_dir(out):
    """Where a run under out-results/ keeps its record; None for a folder elsewhere."""
    rel = os.path.relpath(out, 'out-results')
    return None if ITERS or rel.startswith('..') else os.path.join(RECORDS, rel)


def write_bytes(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)

    def write(tmp):
        with open(tmp, 'wb') as f:
            f.write(data)
    replace_with(path, write)


def keep(out):
    """A finished run's record under results/runs/: its config.json, done.json, eval JSONs and log
    (gzipped), not the checkpoint. From the records a fresh clone rebuilds the tables and goes on with
    the runs they lack; results/runs/ is committed with the tables."""
    if record_dir(out) is None:
        return
    for root, _, files in os.walk(out):
        for f in files:
            if not (f.endswith('.json') and f != 'started.json' or f == 'log.jsonl'):
                continue
            src = os.path.join(root, f)
            data, dest = open(src, 'rb').read(), os.path.join(record_dir(out), os.path.relpath(src, out))
            if f == 'log.jsonl':
                data, dest = gzip.compress(data, mtime=0), dest + '.gz'
            if not (os.path.isfile(dest) and open(dest, 'rb').read() == data):
                write_bytes(dest, data)


def restore(out, args):
    """A run that its record holds and out-results/ does not (a fresh clone): the record's files copied
    back, the checkpoint left to ensure_ckpt(). A killed run's checkpoint resumes instead, and a record
    trained with other arguments than args is not used (a line says so; the run trains again)."""
    rec = record_dir(out)
    if (FRESH or rec is None or os.path.isfile(os.path.join(out, 'done.json')) or os.path.isfile(os.path.join(out, 'ckpt.pt'))
            or not os.path.isfile(os.path.join(rec, 'done.json'))):
        return
    if json.load(open(os.path.join(rec, 'done.json'))).get('argv', [])[1:1 + len(args)] != list(args):
        print(f"{rec} was trained with other arguments than {' '.join(args)}: trained again", flush=True)
        return
    for root, _, files in os.walk(rec):
        for f in files:
            data = open(os.path.join(root, f), 'rb').read()
            rel = os.path.relpath(os.path.join(root, f), rec)
            if rel.endswith('.gz'):
                data, rel = gzip.decompress(data), rel[:-len('.gz')]
            write_bytes(os.path.join(out, rel), data)


def ensure_ckpt(out):
    """The checkpoint of a restored run, which a fine-tune, a later stage or a new reading needs: the run
    trained again from its recorded arguments (and any run it started from), which at one thread on
    the same CPU gives the same weights; a line says so where its last eval differs from the record's."""
    if os.path.isfile(os.path.join(out, 'ckpt.pt')):
        return
    done = json.load(open(os.path.join(out, 'done.json')))
    if 'argv' not in done:
        fail(f"{out} has no checkpoint and its done.json no arguments to train it again with: move it aside")
    argv = [a for a in done['argv'] if a != '--init_from=resume']
    if init_source(argv):
        ensure_ckpt(init_source(argv))
    was = val_curve(out)[-1:]
    print(f"{out}: a recorded run without its checkpoint, trained again for it", flush=True)
    run_with_progress([PY, *argv, '--overwrite=True'], out)
    if val_curve(out)[-1:] != was:
        print(f"warning: {out} trained again ends at {val_curve(out)[-1:]}, its record at {was}: what starts from "
              f"it now starts from other weights than the record's", file=sys.stderr, flush=True)


RUNNING = set()   # the train.py processes under way, which a SIGTERM to this command stops too
STOPPING = threading.Event()    # set by a signal: no run starts after it


def stop():
    """A signal's stop: the train.py runs under way end (each says where it got to), and the runs still
    waiting for a slot, or queued, start none (each raises KeyboardInterrupt in its thread)."""
    STOPPING.set()
    for p in list(RUNNING):
        p.terminate()
    with SLOTS:
        SLOTS.notify_all()


def interrupt(signum, frame):
    """Ctrl-C: stop() the threads' runs, then the KeyboardInterrupt main() reports."""
    stop()
    raise KeyboardInterrupt


def check_stopping():
    if STOPPING.is_set():
        raise KeyboardInterrupt('stopping')


def run_with_progress(cmd, name):
    """A train.py run whose evals ('step N: ...') are printed, prefixed by its folder (runs go in
    parallel); CalledProcessError when it fails, as subprocess.run(check=True)."""
    check_stopping()
    with subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True,
                          env={**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONUNBUFFERED': '1'}) as p:
        RUNNING.add(p)
        try:
            for line in p.stdout:
                if line.startswith('step '):
                    print(f"{name}: {line.rstrip()}", flush=True)
        finally:
            RUNNING.discard(p)
    if p.returncode:
        raise subprocess.CalledProcessError(p.returncode, cmd)


def evaluate(out, *args):
    """eval.py on a run (the whole val stream unless args say otherwise); returns its JSON."""
    sweep = next((a[len('--sweep='):].split('=')[0] for a in args if a.startswith('--sweep=')), None)
    return eval_json(out, f'sweep_{sweep}.json' if sweep else 'stream_val.json', *args)


def mean_sd(xs):
    m = sum(xs) / len(xs)
    return m, (math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else float('nan'))


def val_curve(out):
    return [(r['iter'], r['val_loss']) for r in read_log(out) if r.get('kind') == 'eval']


def seed_list(spec, name, seeds):
    """A run's seeds: the paper's own labels first (spec 'seed_labels'), then 1337, 1338, ...; as many
    as --seeds, or the run's own count (seeds_by_run) when --seeds is the paper's default."""
    n = spec.get('seeds_by_run', {}).get(name, seeds) if seeds == spec.get('seeds', 1) else seeds
    labels = list(spec.get('seed_labels', ()))[:n]
    return labels + list(range(1337, 1337 + n - len(labels)))


def report_runs(paper, spec, seeds, iters, metric='loss'):
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
        out = run_dir(paper, rated(name, lr), seed)
        args = spec['runs'][name] + ([f'--learning_rate={lr:g}', f'--min_lr={lr * floor:g}'] if lr else [])
        return train(args, out, seed, iters), evaluate(out, '--stream=True')[metric]

    def run_all(jobs):
        run_jobs(job, jobs, done)

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
    run_seeds = {name: seed_list(spec, name, seeds) for name in spec['runs']}
    run_all([(name, lr_of(name), seed) for name in spec['runs'] for seed in run_seeds[name]])
    rows, curves = [], {}
    for name in spec['runs']:
        ss, lr = run_seeds[name], lr_of(name)
        losses = [done[(name, lr, seed)][1] for seed in ss]
        curves[name] = [val_curve(run_dir(paper, rated(name, lr), seed)) for seed in ss]
        cfg = json.load(open(os.path.join(run_dir(paper, rated(name, lr), ss[0]), 'config.json')))
        m, sd = mean_sd(losses)
        rows.append({'run': name, 'model': cfg['model'], 'seeds': ss, 'losses': losses, 'mean': m, 'sd': sd,
                     'seconds': sum(done[(name, lr, seed)][0] for seed in ss),
                     'dirs': [run_dir(paper, rated(name, lr), seed) for seed in ss],
                     **({'lr': cfg['learning_rate']} if head(name) in best else {}),
                     **({'grid': {f'{r:g}': v for r, v in grids[name].items()},
                         'finals': {f'{r:g}': v for r, v in means[name].items()}} if name in grids else {})})
    return rows, curves


def first_dir(paper, row):
    """The folder of a row's first seed (a tuned run's at its rate)."""
    return row['dirs'][0] if 'dirs' in row else run_dir(paper, row['run'], row['seeds'][0])


def run_jobs(run, jobs, done, threads=None):
    """done[j] = run(j) for every job j not in done yet, JOBS at once (or `threads`), one thread each; the
    first that fails stops the others (stop()) and its error is raised."""
    todo = [j for j in dict.fromkeys(jobs) if j not in done]
    with ThreadPoolExecutor(threads or JOBS) as pool:
        futures = [pool.submit(run, j) for j in todo]
        for f in as_completed(futures):
            if f.exception() is not None:    # now, not after the hours of runs under way or queued
                for other in futures:
                    other.cancel()
                raise failure(futures, f.exception())
    done.update((j, f.result()) for j, f in zip(todo, futures))


def failure(futures, e):
    """Once e ended a thread: stop() the others, and the error to raise, the first of the futures' that is
    not the KeyboardInterrupt the stop raised in them (e where there is none, as after Ctrl-C)."""
    stop()
    errors = (f.exception() for f in futures if not f.cancelled())    # each ends at once, stopped
    return next((x for x in errors if x is not None and not isinstance(x, KeyboardInterrupt)), e)


def rated(name, lr):
    """A run's name at a rate other than its config's."""
    return name if lr is None else f'{name} lr {lr:g}'


def rates_md(rows, unit='val loss'):
    """The rate brackets of a paper's tuned runs, one line each, and the rate every other tuned row took."""
    md = [f"Each run's own rate (its first seed's {unit} at each rate of its bracket, the best inside the grid "
          f"or at its widest, 7 rates; then the mean over every seed at the grid's best two, the lower taken): " + '; '.join(
              f"{r['run']}: " + ', '.join(f'{lr} {v:.3f}' for lr, v in r['grid'].items()) + '; mean ' +
              ', '.join(f'{lr} {v:.3f}' for lr, v in r['finals'].items()) + f" -> {r['lr']:g}"
              for r in rows if 'grid' in r) + '.']
    shared = [r for r in rows if 'lr' in r and 'grid' not in r]
    if shared:
        md[0] += ' At their model\'s rate: ' + ', '.join(f"{r['run']} {r['lr']:g}" for r in shared) + '.'
    return md


def sizes(paper, ref, pairs, both, ax, unit='val loss'):
    """The headline gaps at both sizes: both = [(folder, rows), ...] (the paper's runs, then its small
    size's under out-results/<folder>/), pairs = [(name at the first size, name at the second)]; a
    table row per pair and size (non-embedding parameters, FLOPs per token and tokens per parameter of
    ref and of the run, ref's gap to the run with two of the larger sd, the verdict), the pairs not
    decidable at this scale, and on ax the gap against ref's tokens per parameter."""
    md = [f'| {ref} against | non-embedding params ({ref} / run) | FLOPs/token | tokens per param | '
          f'{unit} gap ({ref} - run, +- two sd) | verdict |', '|---|---|---|---|---|---|']
    for i, pair in enumerate(pairs):
        pts = []
        for (folder, rows), name in zip(both, pair):
            by = {r['run']: r for r in rows}
            r, q = by[name], by[ref]
            dq, dr = first_dir(folder, q), first_dir(folder, r)
            (_, emb_q, fl_q), (_, emb_r, fl_r) = counts(dq), counts(dr)
            tpp_q, tpp_r = tokens_seen(dq) / emb_q, tokens_seen(dr) / emb_r
            two_sd = 2 * max(r['sd'], q['sd'])
            pts.append((tpp_q, q['mean'] - r['mean'], two_sd))
            md.append(f"| {name} | {emb_q:,} / {emb_r:,} | {fl_q / 1e6:.2f}M / {fl_r / 1e6:.2f}M | "
                      f"{tpp_q:.1f} / {tpp_r:.1f} | {q['mean'] - r['mean']:+.3f} +- {two_sd:.3f} | {verdict(q, r)} |")
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
    """The line under sizes()' table: the pairs whose gap is inside two sd at both sizes."""
    ties = [pair[-1] for pair in pairs
            if all(verdict({r['run']: r for r in rows}[ref], {r['run']: r for r in rows}[name]) == 'tie'
                   for (_, rows), name in zip(both, pair))]
    return [f"Not decidable at this scale (a tie at both sizes): {ref} against {', '.join(ties)}." if ties else
            "Every gap is outside two sd at one size at least."]


TEXTNCA_PAPER = {'staged (2, 8, 32)': '60.3 PPL', 'reversed (32, 8, 2)': '131.1', 'uniform (8, 8, 8)': '119.7',
                 'non-monotone (2, 32, 8)': '77.0', 'SWin-TF-Staged (2, 2, 8, 8, 32, 32)': '64.5',
                 'SWin-TF-6L (w = 32)': '63.2', 'Transformer-6L d96': '52.8 (35.5M)', 'Ts=2': '80.3', 'Ts=6': '73.9',
                 'Ts=8': '117.9'}


def textnca(seeds, iters):
    spec = PAPERS['textnca']
    rows, curves = report_runs('textnca', spec, seeds, iters)
    ref, (target, knob) = 'staged (2, 8, 32)', spec['sweep']
    by = {r['run']: r for r in rows}
    sweep = evaluate(by[target]['dirs'][0], f'--sweep={knob}')
    schedule = [n for n in spec['runs'] if not n.startswith(('Ts=', 'staged, emb'))]
    ts_rows = ['Ts=2', ref, 'Ts=6', 'Ts=8']
    small_rows, _ = report_runs('textnca-small', spec['small'], seeds, iters)
    fig, (ax1, ax2, ax3, ax4) = plt.subplots(1, 4, figsize=(20, 4))
    for i, name in enumerate(schedule):   # the mean over seeds at each eval
        runs = curves[name]
        its = [it for it, _ in runs[0]]
        ax1.plot(its, [sum(c[k][1] for c in runs) / len(runs) for k in range(len(its))],
                 '--' if 'TF' in name else '-', marker='o', color=f'C{i}', ms=3, lw=1, label=name)
    ax1.axhline(UNIGRAM, color='gray', ls=':', label=f'unigram {UNIGRAM:.2f}')
    ax1.set(title='val loss (eval set, mean of seeds)', xlabel='iteration', ylabel='nats / char', ylim=(1.7, 3.4))
    ax1.legend(fontsize=7)
    ts = [json.load(open(os.path.join(by[n]['dirs'][0], 'config.json')))['Ts'] for n in ts_rows]
    for name, t in zip(ts_rows, ts):
        ax2.plot([t] * len(by[name]['losses']), by[name]['losses'], 'o', color='C0', ms=4)
    ax2.plot(ts, [by[n]['mean'] for n in ts_rows], '-', color='C0')
    ax2.set(title='trained from scratch at Ts (each seed, mean)', xlabel='Ts', ylabel='val loss (whole stream)')
    ax3.plot(sweep['values'], sweep['loss'], 'o-')
    ax3.set(title=f'{target}: inference-time Ts (trained Ts = 4)', xlabel="Ts'", ylabel='val loss (eval set)')
    out = run_dir('textnca', ref, 1337)
    md = [f"Recipe: the repo's CPU recipe (AdamW at each run's own rate below, cosine to a tenth of it, warmup 100, beta2 0.99, batch 6 x 128, "
          f"{tokens_seen(out):,} tokens), not the paper's (6e-4, 60k steps, 65k tokens per step). The paper's windows "
          "(8, 32, 128) over 512 become (2, 8, 32) over 128: receptive field 1 + Ts (1 + 7 + 31) = 157 at Ts = 4, "
          "beyond the block only in stage 3, as the paper's 661 over 512. The Transformers are the paper's TF-6L "
          "(learned positions, LayerNorm, GELU, tied) at TextNCA's width, and at matched parameters (d 84). "
          "'holds': staged lower by more than two standard deviations; the paper column is its WikiText-103 PPL.",
          '', *rates_md(rows), '', 'Schedules and controls (Table 2, Table 3):', '']
    md += comparison('textnca', rows, curves, ref, schedule, TEXTNCA_PAPER)
    md += ['', f"The headline pairs at a second size (d 48, {tokens_seen(run_dir('textnca-small', ref, 1337)):,} tokens; "
               f"config/results/textnca/small.py, gpt_small.py), each run at its own rate:", '', *rates_md(small_rows), '']
    swin = 'SWin-TF-Staged (2, 2, 8, 8, 32, 32)'
    md += sizes('textnca', ref, [(swin, swin), ('Transformer-6L d96', 'Transformer-6L')],
                [('textnca', rows), ('textnca-small', small_rows)], ax4)
    md += ['', 'From-scratch Ts sweep (Table 7; windows (2, 8, 32)):', '']
    md += comparison('textnca', rows, curves, ref, ts_rows, TEXTNCA_PAPER)
    lit = by['staged, emb_scale 1 (Eq. 1 literally)']
    md += ['', f"The literal Eq. 1 (emb_scale 1.0, h_0 at the 0.02 init scale), one seed: {lit['mean']:.3f} against "
               f"{by[ref]['losses'][0]:.3f} for the same seed with h_0 times sqrt(d) (unigram {UNIGRAM}).", '',
           f"Inference-time Ts sweep of `{target}` seed 1337 (trained Ts = 4, eval set): " +
           ' | '.join(f"Ts'={v}: {l:.3f}" for v, l in zip(sweep['values'], sweep['loss']))]
    return rows, fig, '\n'.join(md)


def eval_json(out, file, *args, leg=None, sub=None):
    """eval.py on a run with any analysis; returns the JSON it wrote to out/eval/file, redone when the
    checkpoint is newer. leg: the reading of a run trained in legs, kept in out/eval/leg<N>/ (it read
    the checkpoint of that leg, which the next leg replaces). sub: a subfolder of eval/ (one per knob
    setting of the same analysis)."""
    dest = os.path.join(out, 'eval', *([f'leg{leg}'] if leg else []), *([sub] if sub else []))
    path = os.path.join(dest, file)
    ckpt = os.path.join(out, 'ckpt.pt')
    if os.path.isfile(path) and (leg or not os.path.isfile(ckpt)):    # a leg's reading, or a restored record's
        return json.load(open(path))
    if not (os.path.isfile(path) and os.path.getmtime(path) > os.path.getmtime(ckpt)):
        ensure_ckpt(out)
        check_stopping()
        subprocess.run([PY, '-m', 'tools.eval', f'--out_dir={out}', f'--out={dest}', *args], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL, env={**os.environ, 'OMP_NUM_THREADS': '1'})
        keep(out)
    return json.load(open(path))


def train_or_diverge(args, out, seed, iters):
    """train(), where a run that train.py stops after it started (a non-finite loss: exit 2 with a log)
    is a result, not an error. Returns (seconds, the iteration it diverged after, or None)."""
    try:
        return train(args, out, seed, iters), json.load(open(os.path.join(out, 'done.json'))).get('diverged')
    except subprocess.CalledProcessError as e:
        log = [r for r in read_log(out) if r.get('kind') == 'train']
        if e.returncode != 2 or not log:
            raise
        done = {'seconds': float('nan'), 'command': ' '.join(e.cmd[1:]), 'argv': e.cmd[1:], 'diverged': log[-1]['iter']}
        write_text(os.path.join(out, 'done.json'), json.dumps(done))
        keep(out)
        return done['seconds'], done['diverged']


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


def muon_run(model, setting, lr):
    """A depth run of the parcae paper: its name and train.py arguments (the model's config, then the
    setting's recipe and data, then the rate)."""
    spec = PAPERS['parcae']
    return (f'{model}, {setting}, Muon lr {lr:g}',
            [CFG + f"parcae/{spec['depth'][model]}.py", *spec['settings'][setting], f'--learning_rate={lr}'])


# Table 12's four forms of L(T); (L_inf, Z, z) = exp of the free parameters, so each stays positive
FORMS = {
    'L_inf + Z exp(-zT)': lambda T, a, b, c: a.exp() + b.exp() * torch.exp(-c.exp() * T),
    'L_inf + Z (1+T)^-z': lambda T, a, b, c: a.exp() + b.exp() * (1 + T) ** -c.exp(),
    'L_inf + Z T^-z': lambda T, a, b, c: a.exp() + b.exp() * T ** -c.exp(),
    'Z T^-z': lambda T, a, b, c: b.exp() * T ** -c.exp(),
}


def huber(r, delta=1e-3):   # Hoffmann et al.'s delta, on log loss (Parcae Appendix K)
    return torch.where(r.abs() <= delta, 0.5 * r ** 2, delta * (r.abs() - 0.5 * delta))


def fit_form(form, T, L):
    """Parameters of one form fit to points (T, L): the summed Huber loss of log prediction against
    log loss, minimised by L-BFGS from a grid of starts (the paper: random restarts)."""
    T, logL = torch.tensor(T, dtype=torch.float64), torch.tensor(L, dtype=torch.float64).log()
    f, best = FORMS[form], (math.inf, None)
    for a0 in (math.log(min(L)) + d for d in (-0.1, -0.01, -0.001)):
        for b0 in (math.log(max(max(L) - min(L), 1e-6)), math.log(max(L))):
            for c0 in (-2.0, -0.5, 0.5, 1.5):
                p = torch.tensor([a0, b0, c0], dtype=torch.float64, requires_grad=True)
                opt = torch.optim.LBFGS([p], max_iter=500, tolerance_grad=1e-14, tolerance_change=1e-16,
                                        line_search_fn='strong_wolfe')

                def closure():
                    opt.zero_grad()
                    loss = huber(f(T, *p).log() - logL).sum()
                    loss.backward()
                    return loss
                opt.step(closure)
                with torch.no_grad():
                    loss = huber(f(T, *p).log() - logL).sum().item()
                if math.isfinite(loss) and loss < best[0]:
                    best = (loss, p.detach())
    return best[1]


def fit_forms(T, L, mu):
    """Table 12 for one curve: each form's mean Huber loss per point, fit on every T ('in') and fit on
    T <= mu, scored on T > mu ('extrapolation')."""
    res = {}
    for form, f in FORMS.items():
        def score(p, ts, ls):
            with torch.no_grad():
                r = f(torch.tensor(ts, dtype=torch.float64), *p).log() - torch.tensor(ls, dtype=torch.float64).log()
            return huber(r).mean().item()
        lo = [(t, l) for t, l in zip(T, L) if t <= mu]
        hi = [(t, l) for t, l in zip(T, L) if t > mu]
        res[form] = {'in': score(fit_form(form, T, L), T, L),
                     'extrapolation': score(fit_form(form, *zip(*lo)), *zip(*hi))}
    return res


def ranked(scores):
    """The rates of {rate: loss} from the lowest loss up, a diverged (NaN) one last, a tie to the lower rate."""
    return sorted(scores, key=lambda lr: (scores[lr] if math.isfinite(scores[lr]) else math.inf, lr))


def bracket(lrs, loss, most=7):
    """A grid of rates widened by 2x at the edge where the lowest loss lies, until it lies inside (or the
    grid has `most` rates); loss(lr) trains what it needs. Returns (the rates, the best)."""
    lrs = sorted(lrs)
    while True:
        got = {lr: loss(lr) for lr in lrs}
        best = ranked(got)[0]
        if best not in (lrs[0], lrs[-1]) or len(lrs) >= most:
            return lrs, best
        lrs = sorted(lrs + [best / 2 if best == lrs[0] else best * 2])


def verdict(ref, run, higher=False):
    """ref against run (rows with mean and sd over seeds): 'holds' where ref is better by more than two of
    the larger sd, 'tie' within them, 'run lower' (or higher) beyond them, 'one seed' where a side has no sd.
    higher: the metric is better high (an accuracy), else low (a loss)."""
    sd = float('nan') if math.isnan(ref['sd']) or math.isnan(run['sd']) else max(ref['sd'], run['sd'])
    gap = (ref['mean'] - run['mean']) * (1 if higher else -1)     # > 0: ref better
    return ('one seed' if math.isnan(sd) else 'holds' if gap > 2 * sd else 'tie' if gap >= -2 * sd
            else 'run higher' if higher else 'run lower')


def parcae(seeds, iters):
    """Table 2 (one seed per Adam rate), then Section 5.1's comparison on its recipe: the GPT 6L's and
    Parcae's Muon rates each widened until its best is inside, and at those rates the GPT 6L
    (parameter-matched), the GPT 12L (the depth ceiling: Parcae's 12 block applications a forward; at the
    GPT 6L's rate), Parcae and Parcae at fixed depth 1 (at Parcae's), each over seeds, on tiny Shakespeare
    and on the synthetic battery; Parcae's test-time depth and Table 12's four L(T) forms. Then the GPT 6L
    and Parcae at a second size (spec['small']: 20 tokens per parameter), each at its own rate, and the gap
    at both sizes against tokens per parameter."""
    spec, done = PAPERS['parcae'], {}
    parcae_train([(*muon_run(m, 'Shakespeare', lr), 1337) for m in PARCAE_TUNED for lr in PARCAE_MUON_LRS] +
                 [(name, args, 1337) for name, args in spec['runs'].items()], done, iters)

    def loss_of(model):
        def loss(lr):
            name, args = muon_run(model, 'Shakespeare', lr)
            if (name, 1337) not in done:
                parcae_train([(name, args, 1337)], done, iters)
            return parcae_row(done, name)['mean']
        return loss
    brackets = {}    # model -> (its rates, the best, {rate: loss})
    for m in PARCAE_TUNED:
        lrs, best = bracket(PARCAE_MUON_LRS, loss_of(m))
        brackets[m] = (lrs, best, {lr: loss_of(m)(lr) for lr in lrs})
    ss = seed_list(spec, None, seeds)
    # as report_runs: every seed at the bracket's best two rates on Shakespeare, the lower mean wins
    two = {m: ranked(grid)[:2] for m, (_, _, grid) in brackets.items()}
    parcae_train([(*muon_run(m, 'Shakespeare', lr), s) for m in PARCAE_TUNED for lr in two[m] for s in ss], done, iters)
    finals = {m: {lr: parcae_row(done, muon_run(m, 'Shakespeare', lr)[0])['mean'] for lr in two[m]} for m in PARCAE_TUNED}
    chosen = {m: ranked(f)[0] for m, f in finals.items()}
    rate = {m: chosen[PARCAE_TUNED[0] if m.startswith('GPT') else PARCAE_TUNED[1]] for m in spec['depth']}
    slow = ('GPT 12L', 'Parcae', 'GPT 6L', 'Parcae mu=1')     # the longest first: two run at once
    depth = {st: [muon_run(m, st, rate[m])[0] for m in spec['depth']] for st in spec['settings']}
    parcae_train([(*muon_run(m, st, rate[m]), s) for m in slow for st in spec['settings'] for s in ss], done, iters)
    rows = {name: parcae_row(done, name) for name in dict.fromkeys(name for name, _ in done)}
    sweeps = {st: [done[(depth[st][2], s)][3]['sweep'] for s in ss] for st in spec['settings']}
    small_rows, _ = report_runs('parcae-small', spec['small'], seeds, iters)

    fig = parcae_figure(rows, brackets, rate, depth, ss, sweeps, small_rows)
    md = parcae_stability_md(rows, done, brackets, finals, chosen)
    for st in spec['settings']:
        md += parcae_depth_md(st, rows, depth[st], ss, rate)
        if st == 'battery':
            md += parcae_exact_match_md([parcae_exact_match(done, rows[n]) for n in depth[st]])
        md += parcae_forms_md(st, ss, sweeps[st])
    # the first size's pair under the second's names, read from its runs at their rates
    first = [{**rows[name], 'run': m, 'dirs': [run_dir('parcae', name, s) for s in ss]}
             for m in PARCAE_TUNED for name in [muon_run(m, 'Shakespeare', rate[m])[0]]]
    md += ['', f"Section 5.1's pair at a second size (d 48, 4 heads of 12; "
               f"{tokens_seen(first_dir('parcae-small', small_rows[0])):,} tokens; config/results/parcae/*_small.py), "
               "on tiny Shakespeare with Table 21's recipe, each at its own Muon rate:", '',
           *rates_md(small_rows), '']
    both = [('parcae', first), ('parcae-small', small_rows)]
    md += sizes('parcae', 'Parcae', [('GPT 6L', 'GPT 6L')], both, fig.axes[4])
    out = [rows[n] for n in spec['runs']] + [rows[muon_run(m, 'Shakespeare', lr)[0]] for m, (lrs, _, _)
                                             in brackets.items() for lr in lrs if lr != chosen[m]]
    out += [rows[n] for st in spec['settings'] for n in depth[st]]
    return out, fig, '\n'.join(md)


def parcae_train(jobs, done, iters):
    """Trains and scores the (name, args, seed) jobs not in done yet, JOBS at once, one thread each, into
    done[(name, seed)]."""
    args = {(name, seed): a for name, a, seed in jobs}
    run_jobs(lambda j: parcae_run(j[0], args[j], j[1], iters), list(args), done)


def parcae_run(name, args, seed, iters):
    """One run of the parcae paper, trained and read: (seconds, the iteration it diverged after or None,
    its stream loss or NaN, its readings: the battery for a battery run, the depth sweep for Parcae)."""
    out = run_dir('parcae', name, seed)
    secs, diverged = train_or_diverge(args, out, seed, iters)
    if diverged is not None:
        return secs, diverged, float('nan'), {}
    read = {}
    if CFG + 'parcae/battery.py' in args:
        read['battery'] = eval_json(out, 'battery.json', '--battery=True', f'--battery_n={BATTERY_N}')
    if name.startswith('Parcae,'):
        read['sweep'] = evaluate(out, f"--sweep={PAPERS['parcae']['sweep']}")
    return secs, diverged, evaluate(out, '--stream=True')['loss'], read


def parcae_row(done, name):
    """A table row over every seed of the run trained so far."""
    ss = sorted(s for n, s in done if n == name)
    losses = [done[(name, s)][2] for s in ss]
    m, sd = mean_sd(losses)
    cfg = json.load(open(os.path.join(run_dir('parcae', name, ss[0]), 'config.json')))
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


def parcae_figure(rows, brackets, rate, depth, ss, sweeps, small_rows):
    """Top: Table 2's loss against the Adam rate, its train losses and spectral radii, and the Muon rate
    brackets of the GPT 6L and Parcae with every depth run's seeds at its rate (the fifth: the gap at two
    sizes, which sizes() draws); bottom: each setting's val curves, Parcae's test-time depth, and the
    second size's rate brackets with its seeds at the best."""
    spec = PAPERS['parcae']
    fig, axs = plt.subplots(2, 5, figsize=(21, 7))
    parcae_stability_axes(axs[0, 0], axs[0, 1], axs[0, 2], rows)
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
            cs = [val_curve(run_dir('parcae', name, s)) for s in rows[name]['seeds']]
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


def parcae_stability_axes(ax_lr, ax_loss, ax_rho, rows):
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
            log = [r for r in read_log(run_dir('parcae', f'{fam}, Adam lr {lr:g}', 1337)) if r.get('kind') == 'train']
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


def parcae_stability_md(rows, done, brackets, finals, chosen):
    """The recipes, Table 2's stability table with its noise floor, and each tuned model's rate grid and
    the means over seeds at its best two rates."""
    gpt_rise = max(stability(run_dir('parcae', f'GPT 6L, Adam lr {lr:g}', 1337), 50)['rise'] for lr in PARCAE_ADAM_LRS)
    md = [f"Recipes. Table 2 (stability): the RDM's Adam (Q.1: update clipping, atan2 without epsilon, trapezoid, "
          f"{tokens_seen(run_dir('parcae', f'Parcae, Adam lr {PARCAE_ADAM_LRS[0]:g}', 1337)):,} tokens), one seed (1337) "
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
            st, d = stability(run_dir('parcae', name, 1337), 50), done[(name, 1337)][1]
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


def parcae_depth_md(st, rows, names, ss, rate):
    """One setting's comparison: Parcae against the GPT 6L, the GPT 12L and itself at fixed depth 1."""
    deep = verdict(rows[names[1]], rows[names[0]])
    md = ['', f"{st} ({PAPERS['battery']['data'] if st == 'battery' else 'tiny Shakespeare characters'}; "
              f"{tokens_seen(run_dir('parcae', names[0], ss[0])):,} tokens), Table 21 (the GPTs at lr "
              f"{rate['GPT 6L']:g}, Parcae at {rate['Parcae']:g}), seeds "
              f"{', '.join(map(str, ss))}: Parcae (ref) against the parameter-matched GPT 6L, the FLOPs-matched "
              "GPT 12L and itself at fixed depth 1:", '']
    md += comparison('parcae', list(rows.values()), {n: [val_curve(run_dir('parcae', n, s)) for s in rows[n]['seeds']]
                                                     for n in names}, names[2], [names[2], names[0], names[1], names[3]])
    return md + ['', f"Depth on the val loss: GPT 12L against GPT 6L, {deep} ({rows[names[1]]['mean']:.3f} vs "
                     f"{rows[names[0]]['mean']:.3f})."]


def parcae_exact_match_md(acc):
    """The battery setting's exact match table (acc: GPT 6L, GPT 12L, Parcae, Parcae mu=1)."""
    md = ['', "Exact match (greedy generation after the prompt) pooled over Table 8's six tasks, whose prompt "
              f"holds the answer's evidence ({BATTERY_N} val examples a task), mean +- sd over seeds:", '',
          '| run | exact match | per seed | ' + ' | '.join(acc[0]['tasks']) + ' | Parcae vs run |',
          '|---|---|---|' + '---|' * (len(acc[0]['tasks']) + 1)]
    for a in acc:
        md.append(f"| {a['run']} | {a['mean']:.3f} +- {a['sd']:.3f} | {', '.join(f'{x:.3f}' for x in a['losses'])} | "
                  + ' | '.join(f"{a['per_task'][t]:.3f}" for t in a['tasks']) + ' | '
                  + ('' if a is acc[2] else verdict(acc[2], a, higher=True)) + ' |')
    return md + ['', f"Depth on the battery: GPT 12L against GPT 6L, {verdict(acc[1], acc[0], higher=True)} "
                     f"({acc[1]['mean']:.3f} vs {acc[0]['mean']:.3f} exact match)."]


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


def workspace(seeds, iters):
    """Table 3's six rows, each at its own rate, over the paper's seeds; again at a second size
    (spec['small']: 21-24 bytes per non-embedding parameter), and the workspace's gap to each control at
    both sizes against tokens per parameter."""
    spec = PAPERS['workspace']
    rows, curves = report_runs('workspace', spec, seeds, iters, metric='bits_per_byte')
    small_rows, _ = report_runs('workspace-small', spec['small'], seeds, iters, metric='bits_per_byte')
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
    out = run_dir('workspace', 'workspace', rows[-1]['seeds'][0])
    md = [f"Recipe: the repo's CPU recipe (AdamW at each run's own rate below, cosine to a tenth of it, warmup 100, "
          f"batch 8 x 128, {tokens_seen(out):,} bytes), not the paper's. Seeds {', '.join(map(str, rows[0]['seeds']))} (the "
          "paper's labels). 'holds': the workspace lower by more than two standard deviations; at 2/3 beside the "
          "end shows whether the ranking has settled.", '', *rates_md(rows, 'bits per byte'), '']
    md += comparison('workspace', rows, curves, 'workspace', list(spec['runs']), scale=1 / math.log(2))
    small = first_dir('workspace-small', small_rows[-1])
    md += ['', f"The six rows at a second size (3/8 of the width with the first size's head counts: d 48 / 96 / 84, "
               f"heads 12 wide, slots of m = 12; the workspace {counts(small)[0]:,} parameters, each row's d_ff the "
               f"nearest its count; {tokens_seen(small):,} bytes; config/results/workspace/*_small.py), each at its "
               "own rate:", '', *rates_md(small_rows, 'bits per byte'), '']
    pairs = [(n, n) for n in spec['runs'] if n != 'workspace']
    both = [('workspace', rows), ('workspace-small', small_rows)]
    md += sizes('workspace', 'workspace', pairs, both, ax3, unit='bits per byte')
    return rows, fig, '\n'.join(md)


def counts(out):
    """(parameters as the papers count them: a tied matrix twice; non-embedding; FLOPs per token at
    block_size) of a run, built on the meta device from its config.json."""
    cfg = json.load(open(os.path.join(out, 'config.json')))
    with torch.device('meta'):
        m = build_model(cfg['model'], cfg)
    emb = sum(mod.weight.numel() for mod in m.modules() if isinstance(mod, torch.nn.Embedding))
    paper = sum(p.numel() for _, p in m.named_parameters(remove_duplicate=False))
    return paper, m.num_params() - emb, m.flops_per_token(cfg['block_size'])


def at_fraction(curve, frac=2 / 3):
    """The logged eval-set loss at the eval nearest frac of the run: (iteration, loss)."""
    last = curve[-1][0]
    return min(curve, key=lambda p: abs(p[0] - frac * last))


def comparison(paper, rows, curves, ref, names, paper_col=None, scale=1.0):
    """One table of runs against ref: each run's counts, its loss (mean +- sd over its seeds) at the
    end and at 2/3 of the run (the eval-set estimate the log holds, mean over seeds), ref's gap to
    it and the verdict: 'holds' where ref is lower by more than two of the larger sd, 'tie' within
    them, 'run lower' beyond them, 'one seed' where a side has no sd. paper_col: the paper's number
    per run name, shown beside ours. scale: the logged losses (nats) into the rows' unit."""
    by = {r['run']: r for r in rows}
    head = ['run', 'params, paper convention (tied matrix twice)', 'non-embedding', 'FLOPs/token', 'seeds',
            'val loss', 'at 2/3', f'{ref} - run', 'verdict'] + (['paper'] if paper_col else [])
    md = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
    for name in names:
        r, q = by[name], by[ref]
        pc, non_emb, fpt = counts(first_dir(paper, r))
        pts = [at_fraction(c) for c in curves[name]]
        gap = q['mean'] - r['mean']
        sd_txt = '' if math.isnan(r['sd']) else f" +- {r['sd']:.3f}"
        md.append(f"| {name} | {pc:,} | {non_emb:,} | {fpt / 1e6:.2f}M | {len(r['losses'])} | {r['mean']:.3f}{sd_txt} | "
                  f"{scale * sum(l for _, l in pts) / len(pts):.3f} (iter {pts[0][0]}) | "
                  f"{'' if name == ref else f'{gap:+.3f}'} | {'' if name == ref else verdict(q, r)} |" + (f" {paper_col.get(name, '')} |" if paper_col else ''))
    return md


def tokens_seen(out):
    cfg = json.load(open(os.path.join(out, 'config.json')))
    return cfg['batch_size'] * cfg['gradient_accumulation_steps'] * cfg['block_size'] * cfg['max_iters']


def finetunes(spec, by):
    """Table 5's arms: arm -> [(seed, train.py arguments)], one per seed of the pretraining it starts from
    (by: run -> its table row), at spec['ft_lr'] of that pretraining's own rate."""
    return {name: [(seed, spec['runs'][src] + args + [f"--learning_rate={spec['ft_lr'] * by[src]['lr']:g}",
                                                       f'--init_from={pre}'])
                   for seed, pre in zip(by[src]['seeds'], by[src]['dirs'])]
            for name, (src, args) in spec['finetune'].items()}


def finetune_legs(ft, spec, iters):
    """Table 5's arms: each seed of each arm one constant-rate run trained leg by leg (resumes of one run)
    and read after each leg, JOBS runs at once. After the first leg of at least spec['least'] iterations
    at which every seed of every arm in spec['must_pass'] fills above its own LM prior, no further leg.
    ft: arm -> [(seed, train.py arguments with its --init_from)]. Returns ({arm: [(leg, [infill JSON
    per seed])]}, {arm: [seconds per seed]})."""
    legs = spec['legs']
    scale = (lambda n: max(1, n * iters // legs[-1])) if iters else (lambda n: n)
    args = {(name, seed): a for name, runs in ft.items() for seed, a in runs}
    source = {j: init_source(a) for j, a in args.items()}
    for j in args:     # a pretraining retrained at another rate leaves a fine-tune of the old one
        out = run_dir('fon', *j)
        restore(out, args[j])
        how = trained_otherwise(out, args[j])    # before any leg trains: train() would stop at its own
        if how:
            fail(f'{out} was fine-tuned {how}: move it aside to fine-tune it again as asked')
    jobs = sorted(args, key=lambda j: j[0] not in spec['must_pass'])    # the slow revising arms first
    fill = {name: [] for name in ft}
    for leg in map(scale, legs):
        def job(j, leg=leg):
            out, src = run_dir('fon', *j), source[j]
            return train(args[j], out, j[1], 0, upto=leg), eval_json(
                out, 'infill.json', '--infill=True', '--eval_iters=200', f'--baseline_from={src}', leg=leg)
        done = {}
        run_jobs(job, jobs, done)
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
             f'PC - arm at {legs[-1]} it', 'verdict'])
    md = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]

    def last(name):
        m, sd = mean_sd([r['infill_acc'] for r in fill[name][-1][1]])
        return {'mean': m, 'sd': sd}
    pc = last('FON PC + holes')
    for name, reads in fill.items():
        final = reads[-1][1]
        holes = [r['holes'] for r in final]
        priors = [r['pretrained_prefix_acc'] for r in final]
        prior = fill_cell(priors, holes) if None not in priors else 'n/a'
        passed = next((f'{leg} it' for leg, rs in reads if past_prior(rs)), f'not by {legs[-1]} it')
        vs = (['', ''] if name == 'FON PC + holes' else
              [f"{100 * (pc['mean'] - last(name)['mean']):+.1f} points", verdict(pc, last(name), higher=True)])
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


def fon(seeds, iters):
    """FON at CPU scale: Table 2's comparison with Mamba2 and the Transformers, the tied head, the
    length extrapolation of Sec. 4.3 (the pretrained runs read beyond their training length) and Table 5's
    infill arms, each hole fine-tuned from every seed of its own pretraining and read after every leg.
    results/fon.md holds the pretrainings' tables as soon as they are done, and the infill's once it is."""
    spec = PAPERS['fon']
    rows, curves = report_runs('fon', spec, seeds, iters)
    small_rows, _ = report_runs('fon-small', spec['small'], seeds, iters)
    by = {r['run']: r for r in rows}    # each run's seeds, at its own rate
    ext_runs = ['FON PC', 'Mamba2', 'GPT learned', 'GPT RoPE', 'GPT ALiBi']
    with ThreadPoolExecutor(JOBS) as pool:
        ext = dict(zip(ext_runs, pool.map(lambda n: eval_json(
            first_dir('fon', by[n]), 'extrapolate.json', '--extrapolate=True', '--stream=True'), ext_runs)))
    fig = fon_figure(curves, ext)
    md = [f"Headline (FON Table 2 at CPU scale, on this repo's CPU recipe, not the paper's; "
          f"{tokens_seen(first_dir('fon', by['FON PC'])):,} tokens each): val loss over the whole stream; at 2/3 the "
          "logged eval-set loss (mean over seeds). 'holds': FON lower by more than two standard deviations.", '',
          *rates_md(rows), '']
    md += comparison('fon', rows, curves, 'FON PC', ['FON PC', 'Mamba2', 'GPT RoPE', 'GPT ALiBi']) + ['']
    md += [f"The same four at a second size (d 64, {tokens_seen(first_dir('fon-small', small_rows[0])):,} tokens; "
           "config/results/fon/*_small.py), each at its own rate:", '', *rates_md(small_rows), '']
    md += sizes('fon', 'FON PC', [(n, n) for n in ('Mamba2', 'GPT RoPE', 'GPT ALiBi')],
                [('fon', rows), ('fon-small', small_rows)], fig.axes[3]) + ['']
    md += ["The tied head (the paper's) against an untied one and against h_0 scaled by sqrt(d), as a Transformer's "
           "tied embedding is (same recipe; 'run lower' means the variant beats the tied FON):", '']
    md += comparison('fon', rows, curves, 'FON PC', ['FON PC', 'FON PC untied', 'FON PC, h_0 x sqrt(d)']) + ['']
    lengths = [r['length'] for r in next(iter(ext.values()))['rows']]
    md += ['Length extrapolation (pretrained runs, seed 1337, whole val stream at each length): loss, and perplexity '
          'against the training length.', '', '| run | ' + ' | '.join(map(str, lengths)) + ' |',
          '|---|' + '---|' * len(lengths)]
    for name, e in ext.items():
        md.append(f'| {name} | ' + ' | '.join(f"{r['loss']:.3f} ({r['delta_pct']:+.1f}%)" if math.isfinite(r['loss'])
                                              else 'n/a' for r in e['rows']) + ' |')
    # the pretrainings' tables now: the infill arms' legs take hours more
    write('fon', rows, fig, '\n'.join(md + ['', "The infill arms (Table 5) are still training (the same command "
                                                "resumes them and rewrites this file)."]), seeds)
    ft = finetunes(spec, by)
    fill, secs = finetune_legs(ft, spec, iters)
    ft_rows = []
    for name, runs in ft.items():
        seeds_ft = [seed for seed, _ in runs]
        losses = [evaluate(run_dir('fon', name, seed), '--stream=True')['loss'] for seed in seeds_ft]
        m, sd = mean_sd(losses)
        cfg = json.load(open(os.path.join(run_dir('fon', name, seeds_ft[0]), 'config.json')))
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
           "prior. 'holds': PC higher by more than two of the larger sd, 'tie' within them, 'run higher' the arm "
           "ahead beyond them, 'one seed' where a side has no sd.", '']
    md += infill_md(fill, spec['must_pass'])
    md += ['', "Table 8's fill battery, with a BERT-style encoder trained as one (train.py --causal=False) and "
               "future-dependent tasks beyond FON's reach: results/battery.md (python -m tools.results battery)."]
    return rows + ft_rows, fig, '\n'.join(md)


def fon_figure(curves, ext):
    """The pretraining curves and the loss against the eval length; the third panel waits for the infill
    legs (fill_axes), the fourth for the gaps at two sizes (sizes)."""
    fig, (ax1, ax2, ax3, _) = plt.subplots(1, 4, figsize=(20, 4))
    for i, name in enumerate(ext):
        ax1.plot(*zip(*curves[name][0]), 'o-', color=f'C{i}', ms=3, lw=1, label=name)
    ax1.axhline(UNIGRAM, color='gray', ls=':', label=f'unigram {UNIGRAM:.2f}')
    ax1.set(title='pretraining, val loss (eval set)', xlabel='iteration', ylabel='nats / char')
    for i, (name, e) in enumerate(ext.items()):
        ax2.plot([r['length'] for r in e['rows']], [r['loss'] for r in e['rows']], 'o-', color=f'C{i}', label=name)
    ax2.set_xscale('log', base=2)
    ax2.set(title=f"length extrapolation (trained at {e['train_length']}; whole val stream)", xlabel='eval length',
            ylabel='nats / char', ylim=(1, 4))
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


BATTERY_N = 375         # battery examples per task: all of the synthetic val split's (6,000 / 16 tasks)


def wilson(k, n, z=1.96):
    """The Wilson score interval (95%) of k successes in n trials; (nan, nan) when n is 0."""
    if n == 0:
        return float('nan'), float('nan')
    p, zz = k / n, z * z / n
    mid, half = (p + zz / 2) / (1 + zz), z * math.sqrt(p * (1 - p) / n + zz / (4 * n)) / (1 + zz)
    return max(0.0, mid - half), min(1.0, mid + half)


def battery(seeds, iters):
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
    run_jobs(lambda j: train(spec['runs'][j[0]], run_dir('battery', *j), j[1], iters),
             [(name, seed) for name in spec['runs'] for seed in seeds], {})
    done = {}
    run_jobs(lambda j: battery_chain(*j, iters), [(ft, seed) for ft in chains for seed in seeds], done)
    rows = battery_rows(done, seeds)
    counts = BatteryCounts(done, done[(chains[0], 1337)][2]['tasks'], seeds)
    md = battery_table_md(counts, seeds) + battery_arms_md(done, seeds) + battery_claim_md(counts)
    return rows, battery_figure(counts), '\n'.join(md)


def battery_chain(ft, seed, iters):
    """One model's chain: pretrain, hole fine-tune from it, score both on the val stream, read the
    battery. Returns ((seconds), (losses), the battery JSON), pretraining first."""
    spec = PAPERS['battery']
    src, extra = spec['finetune'][ft]
    pre, out = run_dir('battery', src, seed), run_dir('battery', ft, seed)
    secs = (train(spec['runs'][src], pre, seed, iters),
            train(spec['runs'][src] + extra + [f'--init_from={pre}'], out, seed, iters))
    losses = (evaluate(pre, '--stream=True')['loss'], evaluate(out, '--stream=True')['loss'])
    return secs, losses, eval_json(out, 'battery.json', '--battery=True', f'--battery_n={BATTERY_N}')


def battery_rows(done, seeds):
    """The top table: the pretrained runs, then the fine-tuned ones, mean +- sd over seeds."""
    spec, rows = PAPERS['battery'], []
    for phase, names in ((0, list(spec['runs'])), (1, list(spec['finetune']))):
        for name in names:    # a pretraining's numbers come with the first chain that starts from it
            ft = name if phase else next(f for f, (src, _) in spec['finetune'].items() if src == name)
            cfg = json.load(open(os.path.join(run_dir('battery', name, 1337), 'config.json')))
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
                                                                       'per seed', 'PC - arm', 'verdict')]
    md = ['', f"Table 5's arms on the battery (each hole fine-tuned from its own pretraining, as on text: OD from a "
          "drafting-only one, PC then OD from PC's with OD's coupling): fill exact match on "
          f"{' and '.join(spec['arm_tasks'])}, the tasks where FON's fill left the causal readers' chance; mean +- sd "
          "over seeds. 'holds': PC higher by more than two of the larger sd, 'tie' within them, 'run higher' the arm "
          "ahead beyond them, 'one seed' where a side has no sd.", '',
          '| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]

    def stat(arm, t):
        xs = [done[(arm, s)][2]['tasks'][t]['fill'] for s in seeds]
        m, sd = mean_sd(xs)
        return {'mean': m, 'sd': sd, 'xs': xs}
    for arm in spec['arms']:
        cells = [arm, str(len(seeds))]
        for t in spec['arm_tasks']:
            r, pc = stat(arm, t), stat(spec['arms'][0], t)
            cells += [f"{r['mean']:.3f}" + ('' if math.isnan(r['sd']) else f" +- {r['sd']:.3f}"),
                      ', '.join(f'{x:.3f}' for x in r['xs'])]
            cells += (['', ''] if arm == spec['arms'][0] else
                      [f"{pc['mean'] - r['mean']:+.3f}", verdict(pc, r, higher=True)])
        md.append('| ' + ' | '.join(cells) + ' |')
    return md


def battery_claim_md(c):
    """The claim, part by part, counted from the intervals."""
    tasks, above, at_chance = c.tasks, c.above, c.at_chance
    six, near, far = (ts for _, ts in c.groups)
    fills = [label for label, _, _ in c.cols[:4]]
    bi = 'GPT bidirectional fill'
    beaten = [t for t in tasks if any(above(f, bi, t) for f in fills)]
    top = sum(all(above(bi, f, t) for f in fills if f != bi) for t in tasks)
    return ['', 'The claim, part by part (a difference: the two intervals do not overlap; at chance: chance inside the '
            'interval, or the rate below chance):', '',
            f"- FON fills where the causal Transformer fails: FON PC's fill above the causal GPT's on "
            f"{sum(above('FON PC fill', 'GPT causal fill', t) for t in six)} of 6 Table 8 tasks, "
            f"{sum(above('FON PC fill', 'GPT causal fill', t) for t in near)} of the 5 future-dependent ones and "
            f"{sum(above('FON PC fill', 'GPT causal fill', t) for t in far)} of their 5 far variants; below it on "
            f"{sum(above('GPT causal fill', 'FON PC fill', t) for t in tasks)} of {len(tasks)}.",
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


DEPTH_LRS = (1e-3, 2e-3, 4e-3)     # each GPT's grid, widened by bracket() until its best lies inside: from one-hop
                                   # weights 3e-3 learned the second hop, 1e-3 not in 5,000 iterations
HOP_N = 200                        # val examples read per hop count (the split holds 1,000 each)


def depth(seeds, iters):
    """The depth gate: on battery.py's hops (the answer k pointer lookups away, the loss on the answer
    only; each run after a curriculum, hop counts 1 ... N for N = 1 ... 5, a stage repeated while its
    newest hop is not learned), a GPT 3L and a GPT 6L, each at its own best rate (bracket() over
    DEPTH_LRS on seed 1337, by the answer loss on the whole val stream), then over seeds at that rate;
    exact match of greedy generation after the prompt on HOP_N val examples per k. The gate holds where
    the 6-layer GPT is ahead by more than two sd at every k that needs three lookups or more (battery.lookups:
    k = 3, 4, 5; k = 6 is two lookups back around the cycle): only then can this task show what depth buys a looped
    model (Parcae's num_recur, the workspace's rounds, TextNCA's Ts against their fixed-depth controls);
    results/depth.md holds the gate's table as soon as it is decided, then each looped model's against its
    control as that pair is decided (the runs train side by side, slot() giving the first pair's first).

        for d in hops hops1 hops2 hops3 hops4 hops5; do python prepare_data.py $d; done
        python -m tools.results depth"""
    spec, done = PAPERS['depth'], {}
    ss = seed_list(spec, None, seeds)
    with ThreadPoolExecutor(len(spec['runs'])) as pool:
        tuned = {name: pool.submit(depth_tune, name, done, iters, ss) for name in spec['runs']}
        try:
            grids, best = ({name: f.result()[i] for name, f in tuned.items()} for i in (0, 1))
        except BaseException as e:
            raise failure(tuned.values(), e)
    rows, acc = depth_rows(spec['runs'], best, ss, done)
    md, holds = depth_md(acc, grids, best, {name: [done[(name, best[name], s)][3] for s in ss] for name in spec['runs']})
    fig = depth_figure(acc, grids, best, holds)
    if not holds:
        md += ['', f"The gate does not hold, so the looped models' depth sweeps ({', '.join(spec['looped'])}: "
                   "config/results/depth/) were not run."]
        return rows, fig, '\n'.join(md)
    # the gate's table now: the looped models' sweep takes hours more
    write('depth', rows, fig, '\n'.join(md + ['', "The looped models' depth sweeps are still training (the same "
                                                 "command resumes them and rewrites this file)."]), seeds)
    pairs = list(spec['controls'].items())
    with ThreadPoolExecutor(len(spec['looped'])) as pool:    # all side by side, slot() training the first pair's first
        tuned = {name: pool.submit(depth_tune, name, done, iters, ss) for name in spec['looped']}
        for i in range(1, len(pairs) + 1):    # each pair's table as soon as it is decided
            names = [name for pair in pairs[:i] for name in pair]
            try:
                l_grids, l_best = ({name: tuned[name].result()[j] for name in names} for j in (0, 1))
            except BaseException as e:    # a run failed: the others stop now, not after their hours of training
                raise failure(tuned.values(), e)
            unread = [n for n in names if l_best[n] is None]
            read = [n for n in names if l_best[n] is not None]
            l_rows, l_acc = depth_rows(read, l_best, ss, done)
            l_md = depth_looped_md(l_acc, l_grids, l_rows, acc, {n: done[(n, l_best[n], ss[0])][3] for n in read})
            l_md += depth_unread_md(unread, l_grids)
            fig = depth_figure(acc, grids, best, holds)
            depth_looped_axes(fig.add_subplot(1, 3, 3), l_acc, acc)
            if i < len(pairs):
                rest = f"{', '.join(n for pair in pairs[i:] for n in pair)}: still training (the same command " \
                       "resumes them and rewrites this file)."
                write('depth', rows + l_rows, fig, '\n'.join(md + ['', *l_md, rest]), seeds)
    return rows + l_rows, fig, '\n'.join(md + ['', *l_md])


def depth_tune(name, done, iters, ss):
    """One run's rate, bracket() over DEPTH_LRS on seed 1337 by the answer loss, then its seeds ss at that
    rate: ({lr: loss}, the rate). A model that reads no listing at any rate of DEPTH_LRS has no rate to
    find: ({lr: its one-hop loss}, None), no wider grid, no more seeds."""
    def loss(lr):
        depth_train([(name, lr, 1337)], done, iters)
        return done[(name, lr, 1337)][1] if done[(name, lr, 1337)][2] is not None else math.inf
    with live(depth_rank(name)):
        depth_train([(name, lr, 1337) for lr in DEPTH_LRS], done, iters)
        if all(done[(name, lr, 1337)][2] is None for lr in DEPTH_LRS):
            return {lr: done[(name, lr, 1337)][1] for lr in DEPTH_LRS}, None
        lrs, best = bracket(DEPTH_LRS, loss)
        depth_train([(name, best, s) for s in ss], done, iters)
    return {lr: done[(name, lr, 1337)][1] for lr in lrs}, best


def depth_rows(runs, best, ss, done):
    """The table rows (answer loss over seeds) and the exact match, mean and sd over seeds: per task for
    a GPT ({task: {'mean', 'sd'}}), per test-time depth and task for a looped model."""
    rows, acc = [], {}
    for name in runs:
        got = [done[(name, best[name], s)] for s in ss]
        m, sd = mean_sd([g[1] for g in got])
        dirs = [g[3][-1][1] for g in got]
        model = json.load(open(os.path.join(dirs[0], 'config.json')))['model']
        rows.append({'run': f'{name} (lr {best[name]:g})', 'model': model, 'seeds': ss, 'dirs': dirs,
                     'losses': [g[1] for g in got],
                     'mean': m, 'sd': sd, 'seconds': sum(g[0] for g in got)})
        per = lambda reads: {t: dict(zip(('mean', 'sd'), mean_sd([r[t] for r in reads]))) for t in reads[0]}  # noqa: E731
        acc[name] = ({v: per([{**g[2][v], DEEP: deep_hops(g[2][v])} for g in got]) for v in got[0][2]}
                     if name in PAPERS['depth']['looped'] else per([g[2] for g in got]))
    return rows, acc


def depth_rank(name):
    """A run's place in the order slot() trains them: the gate's GPTs, then the looped models as listed."""
    return [*PAPERS['depth']['runs'], *PAPERS['depth']['looped']].index(name)


def depth_train(jobs, done, iters):
    """Trains and reads the (name, lr, seed) jobs into done, each in its own thread, slot() deciding which
    train: the first of the runs and looped models first, then the lowest seed, then the lowest rate."""
    def run(job):
        name, lr, seed = job
        with slot((depth_rank(name), seed, lr)):
            return depth_run(name, lr, seed, iters)
    run_jobs(run, jobs, done, threads=max(1, len(jobs)))


SLOTS = threading.Condition()
WAITING, HELD, LIVE = [], [], set()    # the ranks waiting for a slot, the ranks holding one; the live runs (a
                                       # rank's first element, under live())


def free_for(rank):
    """The slots free to rank: JOBS less those held and one kept for each live run of a lower rank that
    neither waits nor holds one (between two of its own steps: its next is a moment away)."""
    asking = {r[0] for r in WAITING + HELD}
    return JOBS - len(HELD) - len({n for n in LIVE if n < rank[0] and n not in asking})


@contextlib.contextmanager
def slot(rank):
    """One of JOBS runs at a time; a slot goes to the waiting run of the lowest rank."""
    with SLOTS:
        WAITING.append(rank)
        SLOTS.wait_for(lambda: STOPPING.is_set() or free_for(rank) > 0 and min(WAITING) == rank)
        WAITING.remove(rank)
        check_stopping()
        HELD.append(rank)
        SLOTS.notify_all()    # the next rank may take a slot still free
    try:
        yield
    finally:
        with SLOTS:
            HELD.remove(rank)
            SLOTS.notify_all()


@contextlib.contextmanager
def live(n):
    """Run n's steps under way (its rate bracket, then its seeds): slot() keeps a slot for it between them."""
    with SLOTS:
        LIVE.add(n)
    try:
        yield
    finally:
        with SLOTS:
            LIVE.discard(n)
            SLOTS.notify_all()


def stage_dir(name, lr, n, seed, r=0):
    """The run folder of the curriculum's stage n (hop counts 1 ... n), or of the task itself (n None);
    r: the stages repeated before it on its run's curriculum (a run that repeats none keeps the plain names)."""
    return run_dir('depth', f'{name} lr {lr:g}' + (f' up to {n} hops' if n else '') + (f' +{r}' if r else ''), seed)


STAGE_REPEATS = 2    # a stage that has not learned its newest hop is trained again from its own end, at most this
                     # often: the GPT 6L sat a whole stage at one hop, then learned the rest a stage later (seed 1338)
                     # or never (seed 1339), so one stage's length decided a seed's verdict


def stage_learned(out, n):
    """Stage n (hop counts 1 ... n) has learned its newest hop: its last answer loss is below half of what it is
    with hops 1 ... n - 1 exact and hop n at chance, -ln(chance) / n (the n hop counts are equally frequent)."""
    from battery import CHANCE
    return val_curve(out)[-1][1] < -math.log(CHANCE[f'hop{n}of{n}']) / (2 * n)


def listing_unread(out):
    """The one-hop stage ends no better than a uniform guess among the listed letters (ln 7): the run has not
    read the listing, and every later hop is a lookup in it. TextNCA sat at ln 26 = 3.258 (its GRU state
    saturated, the answer blind to the listing) at every rate; every run that went on learned below 1.3."""
    from battery import CHANCE
    return val_curve(out)[-1][1] >= -math.log(CHANCE['hop1of1'])


def depth_run(name, lr, seed, iters):
    """One run of the depth task (a GPT of the gate or a looped model) at one rate and seed, after its
    curriculum (each stage from the one before's weights, repeated while its newest hop is not learned):
    (seconds, answer loss on the val stream, {task: exact match} or a looped model's per test-time depth
    {depth: {task: exact match}}, [(n, folder)] of every stage trained, the task's last with n None). A run
    of seed 1337 whose one-hop stages leave the listing unread stops there: (seconds, their last answer loss,
    None, stages)."""
    spec, rate = PAPERS['depth'], [f'--learning_rate={lr}', f'--min_lr={lr / 10:g}']
    args = {**spec['runs'], **spec['looped']}[name]
    secs, start, r, stages = 0, [], 0, []
    for n in UP_TO:
        for again in range(STAGE_REPEATS + 1):
            stage = stage_dir(name, lr, n, seed, r)
            secs += train(args + spec['stage'] + rate + [f'--dataset=hops{n}'] + start, stage, seed, iters)
            start, stages = [f'--init_from={stage}'], stages + [(n, stage)]
            if again == STAGE_REPEATS or stage_learned(stage, n):
                break
            r += 1
        if n == 1 and seed == 1337 and listing_unread(stage):   # the seed that picks the rate; the others' tables
                                                                 # need the task read at a rate where 1337 read it
            return secs, val_curve(stage)[-1][1], None, stages
    out = stage_dir(name, lr, None, seed, r)    # the task (hop counts 1 ... 6): one more stage
    secs += train(args + spec['stage'] + rate + ['--dataset=hops'] + start, out, seed, iters)

    def hops(*knob, sub=None):
        tasks = eval_json(out, 'battery.json', '--battery=True', f'--battery_n={HOP_N}', *knob, sub=sub)['tasks']
        return {t: r['generate'] for t, r in tasks.items()}
    knob = spec['knob'].get(name)
    acc = {v: hops(f'--{knob}={v}', sub=f'{knob}{v}') for v in spec['sweep']} if knob else hops()
    return secs, evaluate(out, '--stream=True')['loss'], acc, stages + [(None, out)]


def depth_md(acc, grids, best, stages):
    """The rate brackets, the exact match per hop count with the verdicts, and the gate. stages: {GPT:
    [depth_run()'s stages per seed]}."""
    from battery import CHANCE, lookups
    shallow, deep = PAPERS['depth']['runs']
    dirs = [d for _, d in stages[deep][0]]
    *curriculum, out = stages[deep][0]
    size = {name: counts(runs[0][-1][1]) for name, runs in stages.items()}
    md = ["Each GPT's rate: the lowest answer loss of seed 1337 over " + '; '.join(
              f"{name} " + ', '.join(f'{lr:g} {v:.3f}' for lr, v in grids[name].items()) for name in grids) +
          ". Parameters (paper convention / non-embedding) and FLOPs per token: " + '; '.join(
              f"{name} {p:,} / {e:,}, {f / 1e6:.2f}M" for name, (p, e, f) in size.items()) +
          f". The {deep} at its rate, seed 1337: {tokens_seen(out[1]):,} tokens seen on the task after "
          f"{sum(tokens_seen(d) for _, d in curriculum):,} on its curriculum ({sum(map(tokens_seen, dirs)) / size[deep][1]:.0f} "
          f"per non-embedding parameter), 8 answers in every window (one listing a window; the first answer "
          f"scored); the answer loss at the end of each stage (hop counts 1 ... N, a stage repeated from its own end "
          f"while its loss is above half of what it is with hop N at chance, at most {STAGE_REPEATS} times): " +
          ', '.join(f"N = {n} " + ' then '.join(f'{val_curve(d)[-1][1]:.3f}' for m, d in curriculum if m == n)
                    for n in UP_TO) + '. Stages repeated, per seed: ' + '; '.join(
              f"{name} " + ', '.join(str(len(runs) - 1 - len(UP_TO)) for runs in stages[name]) for name in stages) +
          '.', '',
          f'| hops k | lookups | chance | {shallow} | {deep} | {deep} - {shallow} | verdict |',
          '|---|---|---|---|---|---|---|']
    gate = []
    for t in acc[deep]:
        k = int(t[3:])
        v = verdict(acc[deep][t], acc[shallow][t], higher=True)
        if lookups(k) >= 3:
            gate.append(v == 'holds')
        md.append(f"| {k} | {lookups(k)} | {CHANCE[t]:.3f} | {acc[shallow][t]['mean']:.3f} +- "
                  f"{acc[shallow][t]['sd']:.3f} | {acc[deep][t]['mean']:.3f} +- {acc[deep][t]['sd']:.3f} | "
                  f"{acc[deep][t]['mean'] - acc[shallow][t]['mean']:+.3f} | {v} |")
    return md + ['', f"**Gate: {'holds' if all(gate) else 'does not hold'}** ({deep} ahead by more than two sd at "
                     f"{sum(gate)} of the {len(gate)} hop counts that need three lookups or more). Lookups: the fewest "
                     f"pointer lookups that answer k, min(k, 8 - k), since k steps along the 8-cycle are 8 - k back. "
                     f"Exact match: greedy generation after the prompt equals the answer, {HOP_N} val examples per k, "
                     f"mean +- sd over seeds."], all(gate)


DEEP = '3+ lookups'    # a looped model's reading pooled over the hop counts the gate is about


def deep_hops(reads):
    """Exact match pooled over the hop counts that need three lookups or more: {task: value} -> their mean."""
    from battery import lookups
    ks = [t for t in reads if t.startswith('hop') and lookups(int(t[3:])) >= 3]
    return sum(reads[t] for t in ks) / len(ks)


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
    md = ["The looped models on the task, through the same curriculum, each at its own rate (seed 1337's answer loss: " +
          '; '.join(f"{n} " + ', '.join(f'{lr:g} {v:.3f}' for lr, v in g.items()) for n, g in grids.items()) +
          "), seeds " + ', '.join(map(str, ss)) + ". Exact match at three lookups or more (each "
          "seed's mean over k = 3, 4, 5, then mean +- sd over seeds) against the depth run at test time; the GPTs: " +
          ', '.join(f"{n} {deep_hops({t: r['mean'] for t, r in a.items()}):.3f}" for n, a in gpt.items()) + '.', '']
    for model, control in ((m, c) for m, c in spec['controls'].items() if m in acc and c in acc):
        knob = spec['knob'][model]
        md += [f"Parameters (paper convention / non-embedding), FLOPs per token at the training depth, tokens per "
               f"non-embedding parameter (curriculum and task, seed {ss[0]}): {size(model)}; {size(control)}.", '',
               f"| {knob} | {run[model]} | {run[control]} | {model} - {control} | verdict |", '|---|---|---|---|---|']
        for v in spec['sweep']:
            a, b = acc[model][v][DEEP], acc[control][v][DEEP]
            md.append(f"| {v} | {a['mean']:.3f} +- {a['sd']:.3f} | {b['mean']:.3f} +- {b['sd']:.3f} | "
                      f"{a['mean'] - b['mean']:+.3f} | {verdict(a, b, higher=True)} |")
        md.append('')
    return md


def depth_unread_md(unread, grids):
    """A line per pair a side of which read no listing at any rate: not decidable on this task."""
    from battery import CHANCE
    md = []
    for model, control in PAPERS['depth']['controls'].items():
        names = [n for n in (model, control) if n in unread]
        if names:
            md += [f"**{model} against {control}: not decidable on this task.** " + '; '.join(
                f"{n} ended its one-hop stages (seed 1337, {STAGE_REPEATS + 1} passes) at " +
                ', '.join(f'{v:.3f} at {lr:g}' for lr, v in grids[n].items()) for n in names) +
                f": no better than a uniform guess among the listed letters ({-math.log(CHANCE['hop1of1']):.3f}), "
                "so the listing that every hop looks up was never read, and the curriculum stopped there.", '']
    return md


def depth_looped_axes(ax, acc, gpt):
    """Exact match at three lookups or more against test-time depth: each looped model (solid) and its control (dashed),
    the GPTs as lines."""
    spec = PAPERS['depth']
    for i, (model, control) in enumerate((m, c) for m, c in spec['controls'].items() if m in acc and c in acc):
        for name, style in ((model, 'o-'), (control, 's--')):
            ax.plot(spec['sweep'], [acc[name][v][DEEP]['mean'] for v in spec['sweep']],
                    style, color=f'C{i + 2}', label=f"{name} ({spec['knob'][name]})")
    for i, (name, a) in enumerate(gpt.items()):
        ax.axhline(deep_hops({t: r['mean'] for t, r in a.items()}), color=f'C{i}', ls=':', label=name)
    ax.set(title='exact match at k = 3, 4, 5 (3+ lookups) against test-time depth', xlabel='num_recur / rounds / Ts',
           ylabel='exact match', ylim=(0, 1.05))
    ax.legend(fontsize=7)


def depth_figure(acc, grids, best, holds):
    """Exact match against the hop count per GPT, and each GPT's rate bracket; once the gate holds, a
    third slot for the looped models."""
    from battery import CHANCE
    _, deep = PAPERS['depth']['runs']
    panels = 3 if holds else 2
    fig = plt.figure(figsize=(5.7 * panels, 4))
    ax1, ax2 = fig.add_subplot(1, panels, 1), fig.add_subplot(1, panels, 2)
    ks = [int(t[3:]) for t in acc[deep]]
    for i, name in enumerate(PAPERS['depth']['runs']):
        ax1.errorbar(ks, [acc[name][t]['mean'] for t in acc[name]], [acc[name][t]['sd'] for t in acc[name]],
                     marker='o', capsize=3, color=f'C{i}', label=f'{name} (lr {best[name]:g})')
        ax2.plot(list(grids[name]), list(grids[name].values()), 'o-', color=f'C{i}', label=name)
    ax1.plot(ks, [CHANCE[t] for t in acc[deep]], 'k:', label='chance')
    ax1.set(title='exact match against hops (mean +- sd over seeds)', xlabel='k (pointer lookups)',
            ylabel='exact match', ylim=(0, 1.05))
    ax2.set(title='rate bracket (seed 1337)', xlabel='learning rate', ylabel='answer loss (val stream)', xscale='log')
    ax1.legend(fontsize=8)
    ax2.legend(fontsize=8)
    return fig


JOBS = 2         # train.py runs at once, one thread each (--jobs)
ITERS = 0        # --iters: a quick look in its own folder, never mixed with the full runs
UNIGRAM = 3.31   # tiny Shakespeare's unigram entropy, nats per character


# each paper's function: trains its runs, scores them, returns (rows, figure, Markdown)
PAPER_FUNCTIONS = {'textnca': textnca, 'parcae': parcae, 'workspace': workspace, 'fon': fon, 'depth': depth,
                   'battery': battery}


def write(paper, rows, fig, extra, seeds):
    # results/ holds the full runs' tables; a quick --iters look writes beside its runs
    dest = os.path.join(ROOT, 'results') if not ITERS else os.path.join(ROOT, 'out-results', f'{paper}-iters{ITERS}')
    os.makedirs(dest, exist_ok=True)
    fig.tight_layout()
    png = os.path.join(dest, f'{paper}.png')

    def save_png(tmp):
        fig.savefig(tmp, dpi=80, format='png')
        Image.open(tmp).convert('RGB').quantize(256).save(tmp, format='png', optimize=True)   # a palette: a third of the bytes
    replace_with(png, save_png)
    lines = [f"# {paper}: {PAPERS[paper]['claim']}", '',
             f"{PAPERS[paper].get('data', 'Tiny Shakespeare characters')}, whole validation stream (tools/eval.py "
             f"--stream=True), seeds {', '.join(map(str, rows[0].get('seeds', [])))} (the per-seed column lists each run's, in "
             f"that order). Command: "
             f"`python -m tools.results {paper}`; each run's config, log and readings: results/runs/{paper}*/.", '',
             f"| run | model | {PAPERS[paper].get('metric', 'val loss')} (mean +- sd) | per seed | train wall time |",
             '|---|---|---|---|---|']
    for r in rows:
        sd = '' if math.isnan(r['sd']) else f" +- {r['sd']:.3f}"
        lines.append(f"| {r['run']} | {r['model']} | {r['mean']:.3f}{sd} | "
                     f"{', '.join(f'{x:.3f}' for x in r['losses'])} | {r['seconds'] / 60:.1f} min |")
    lines += ['', extra, '']
    write_text(os.path.join(dest, f'{paper}.md'), '\n'.join(lines))
    write_text(os.path.join(dest, f'{paper}.json'), json.dumps(rows, indent=1))
    print('\n'.join(lines))


def main(argv):
    if '-h' in argv or '--help' in argv:   # before anything starts: the usage is the docstring
        print(__doc__.strip())
        return
    usage = f"usage: python -m tools.results {{{'|'.join(PAPERS)}}} [--seeds=N] [--iters=N] [--jobs=N] [--fresh]"
    bad = [a for a in argv if a.startswith('-') and a != '--fresh' and
           (a.split('=', 1)[0] not in ('--seeds', '--iters', '--jobs') or '=' not in a)]
    if bad:
        fail((f"{bad[0]} takes a value: {bad[0]}=N" if bad[0] in ('--seeds', '--iters', '--jobs') else
              f"unknown option {bad[0]!r}") + f" ({usage})")
    opts = dict(a[2:].split('=', 1) for a in argv if a.startswith('--') and a != '--fresh')
    papers = [a for a in argv if not a.startswith('-')]
    if len(papers) != 1 or papers[0] not in PAPERS:
        fail((f"unknown paper {next(p for p in papers if p not in PAPERS)!r}" if set(papers) - set(PAPERS) else
              "name one paper" if not papers else f"one paper at a time, got {' '.join(papers)}") + f" ({usage})")
    paper = papers[0]
    for k in ('seeds', 'iters', 'jobs'):
        if k in opts and not (opts[k].isdigit() and int(opts[k]) >= (k != 'iters')):
            fail(f"--{k} must be a whole number{' >= 1' if k != 'iters' else ''}, got {opts[k]!r}")
    for dataset, prepare in PAPERS[paper].get('datasets', [('shakespeare_char', 'shakespeare_char')]):
        if not os.path.isfile(os.path.join(ROOT, 'data', dataset, 'train.bin')):
            fail(f"no data/{dataset}: run python prepare_data.py {prepare} first"
                 + ('' if dataset in DATASETS else ' (offline: add --input path/to/input.txt)'))
    global ITERS, FRESH, JOBS
    seeds, ITERS = int(opts.get('seeds', PAPERS[paper]['seeds'])), int(opts.get('iters', 0))
    JOBS = int(opts.get('jobs', JOBS))
    FRESH = '--fresh' in argv
    try:
        rows, fig, extra = PAPER_FUNCTIONS[paper](seeds, ITERS)
    except KeyboardInterrupt:
        print(f"interrupted: finished runs stay in {os.path.dirname(run_dir(paper, 'x', 0))}/ "
              f"and the same command resumes the rest", file=sys.stderr)
        sys.exit(130)
    except subprocess.CalledProcessError as e:   # the run's own error line is above this one
        fail(f"{' '.join(e.cmd[1:3])} ... stopped (exit {e.returncode}); the same command resumes from the runs "
             f"that finished once that is mended")
    write(paper, rows, fig, extra, seeds)


if __name__ == '__main__':
    # SIGTERM, SIGHUP, Ctrl-C: the train.py runs it started stop too (each says where it got to), and the
    # threads start no other
    import signal
    from configurator import stop_on_signals
    stop_on_signals(stop)
    signal.signal(signal.SIGINT, interrupt)
    main(sys.argv[1:])
