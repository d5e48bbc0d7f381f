"""The experiments, declared: each paper's runs (name -> train.py arguments: a config file of
config/results/<paper>/ and the one or two values a sweep varies), the seeds each is trained with, the rates
tuned, and what to report. The modules named after the papers read them."""
from battery import UP_TO

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
            # the same sweep with the update gate's chrono init fixed at the flagship's N = 3 x 4 steps: without it the
            # init's range (z from 1/N to 1/2) moves with Ts, and the sweep changes two things at once
            **{f'Ts={k}, init N = 12': [CFG + 'textnca/textnca.py', f'--Ts={k}', '--z_bias_steps=12'] for k in (2, 6, 8)},
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
                                                             'Ts=2, init N = 12', 'Ts=6, init N = 12',
                                                             'Ts=8, init N = 12', 'staged, emb_scale 1 (Eq. 1 literally)')},
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
        'train_log': True,    # its records keep the train log: the stability table reads every train record
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
        'seeds': 5,    # reported, RATE_SEED's apart: at three a side the two-sd rule sits near Welch p 0.06
        'data': "battery.py's hops (hop1 ... hop6: a random 8-cycle of letters listed as pairs, the answer k steps "
                "along it; eight queries a listing, each its own letter and k, loss on the answers only, the first "
                "answer scored)",
        # the task with a test split (no example in train or val) that every verdict reads and no choice does
        'datasets': [('hops', f'hops --n_test {6 * 200}')] + [(f'hops{n}', f'hops{n}') for n in UP_TO],
        'metric': 'answer loss',
        'runs': {'GPT 3L': [CFG + 'depth/gpt_3l.py'], 'GPT 6L': [CFG + 'depth/gpt_6l.py']},
        'stage': [CFG + 'depth/stage.py'],     # the curriculum: hop counts 1 ... N for N = 1 ... 5, then the task
        # once the gate holds: each looped model at the GPT 3L's width and the 6L's depth, and its control trained at
        # depth 1 (the loop run once), read at each test-time depth of 'sweep' through its knob
        'looped': {'Parcae': [CFG + 'depth/parcae.py'],
                   'Parcae mu=1': [CFG + 'depth/parcae.py', '--mean_recurrence=1', '--mean_backprop_depth=1',
                                   '--depth_sampling=fixed'],
                   # Table 5's residual gate: the GRU's state saturated under the answer-only loss (ln 26 at one hop)
                   'TextNCA residual': [CFG + 'depth/textnca_residual.py'],
                   'TextNCA residual Ts=1': [CFG + 'depth/textnca_residual.py', '--Ts=1'],
                   'workspace': [CFG + 'depth/workspace.py'],
                   'workspace R=1': [CFG + 'depth/workspace.py', '--n_rounds=1'],
                   'TextNCA': [CFG + 'depth/textnca.py'],
                   'TextNCA Ts=1': [CFG + 'depth/textnca.py', '--Ts=1']},
        # each control's rate bracketed as its model's: Parcae at 4e-3 did not learn one hop in three passes, so a
        # control at a rate picked for its model could lose to the rate, not to the depth
        'controls': {'Parcae': 'Parcae mu=1', 'TextNCA residual': 'TextNCA residual Ts=1', 'workspace': 'workspace R=1',
                     'TextNCA': 'TextNCA Ts=1'},
        'knob': {'Parcae': 'num_recur', 'Parcae mu=1': 'num_recur', 'workspace': 'rounds', 'workspace R=1': 'rounds',
                 'TextNCA': 'Ts', 'TextNCA Ts=1': 'Ts', 'TextNCA residual': 'Ts', 'TextNCA residual Ts=1': 'Ts'},
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


# the depth gate's: each GPT's grid, widened by bracket() until its best lies inside (from one-hop weights 3e-3
# learned the second hop, 1e-3 not in 5,000 iterations)
DEPTH_LRS = (1e-3, 2e-3, 4e-3)
RATE_SEED = 1337    # each depth rate is chosen on this seed alone; the reported seeds are the next 'seeds' ones
HOP_N = 200         # test examples read per hop count
STAGE_REPEATS = 2    # a stage that has not learned its newest hop is trained again from its own end, at most this
                     # often: the GPT 6L sat a whole stage at one hop, then learned the rest a stage later (seed 1338)
                     # or never (seed 1339), so one stage's length decided a seed's verdict
BATTERY_N = 375      # battery examples per task: all of the synthetic val split's (6,000 / 16 tasks)
UNIGRAM = 3.31       # tiny Shakespeare's unigram entropy, nats per character


def seed_list(spec, name, seeds):
    """A run's seeds: the paper's own labels first (spec 'seed_labels'), then 1337, 1338, ...; as many
    as --seeds, or the run's own count (seeds_by_run) when --seeds is the paper's default."""
    n = spec.get('seeds_by_run', {}).get(name, seeds) if seeds == spec.get('seeds', 1) else seeds
    labels = list(spec.get('seed_labels', ()))[:n]
    return labels + list(range(1337, 1337 + n - len(labels)))


def rated(name, lr):
    """A run's name at a rate other than its config's."""
    return name if lr is None else f'{name} lr {lr:g}'


def muon_run(model, setting, lr):
    """A depth run of the parcae paper: its name and train.py arguments (the model's config, then the
    setting's recipe and data, then the rate)."""
    spec = PAPERS['parcae']
    return (f'{model}, {setting}, Muon lr {lr:g}',
            [CFG + f"parcae/{spec['depth'][model]}.py", *spec['settings'][setting], f'--learning_rate={lr}'])
