"""tools/results/'s comparisons are fair where they claim to be (parameter counts from the very argument
lists the driver trains), a run that diverges is a result rather than a crash, and a missing dataset
is one line. Nothing here trains a model."""
import collections
import json
import math
import os
import re
import subprocess
import sys
import threading
import time

import pytest
import torch

from tools.results import cli, stats, tables, tune
from tools.results import spec as lab_spec
from tools.results import battery as lab_battery, depth as lab_depth, fon as lab_fon, parcae as lab_parcae
from tools.results import runner, textnca as lab_textnca
from tools.results.pool import ROOT
from tools.results.runner import Lab, Options, Unrecorded
import fon
import models
from train import resolve_config


# The lab trains in subprocesses; its stand-ins here run in its threads, and CPython 3.11's ast.parse
# (configurator's literal_eval) is not thread-safe: "AST constructor recursion depth mismatch".
PARSING = threading.Lock()


def made_up_run(args, out, vocab_size, seed=None):
    """A run folder as train.py starts it: its config.json, resolved from the run's arguments; nothing trains."""
    os.makedirs(out, exist_ok=True)
    with PARSING:
        cfg = resolve_config([os.path.join(ROOT, a) if a.startswith('config/') else a for a in args
                              if not a.startswith('--init_from=')] + [f'--vocab_size={vocab_size}'] +
                             ([f'--seed={seed}'] if seed is not None else []))
    json.dump(cfg, open(os.path.join(out, 'config.json'), 'w'))
    return cfg


def n_params(args, vocab_size):
    cfg = resolve_config(args + [f'--vocab_size={vocab_size}'])
    return sum(p.numel() for p in models.build_model(cfg['model'], cfg).parameters())


@pytest.fixture
def lab():
    """A results command's runner at the default options (its out-results/ relative: tests chdir to tmp_path)."""
    return Lab(Options())


def test_every_run_is_a_config_file_and_its_sweep_values(lab):
    # the numbers a run trains with live in config/results/<paper>/; the lab adds only what a sweep varies
    for paper, spec in lab_spec.PAPERS.items():
        runs = {**spec['runs'], **{n: a for n, (_, a) in spec.get('finetune', {}).items()}}
        for name, args in runs.items():
            files = [a for a in args if not a.startswith('--')]
            assert all(f.startswith(f'config/results/{paper}/') and os.path.isfile(os.path.join(ROOT, f))
                       for f in files), (paper, name, files)
            assert len(args) - len(files) <= 2, (paper, name, args)
        assert all(args[0].startswith('config/') for args in spec['runs'].values())


def test_every_paper_has_its_function():
    # main() runs PAPER_FUNCTIONS[paper] for a name it checked against PAPERS: the two name the same papers
    assert list(cli.PAPER_FUNCTIONS) == list(lab_spec.PAPERS)
    assert all(f.__name__ == paper for paper, f in cli.PAPER_FUNCTIONS.items())


def test_parcae_table_2_runs_are_matched_and_differ_only_where_the_paper_says():
    runs = lab_spec.PAPERS['parcae']['runs']
    for lr in lab_spec.PARCAE_ADAM_LRS:
        counts = {m: n_params(runs[f'{m}, Adam lr {lr:g}'], 65) for m, _ in lab_spec.STABILITY}
        assert all(abs(c / counts['Parcae'] - 1) < 1e-3 for c in counts.values()), counts
        cfg = {m: resolve_config(runs[f'{m}, Adam lr {lr:g}']) for m, _ in lab_spec.STABILITY}
        rdm, base = cfg['RDM, res. norm'], cfg['RDM, base']     # config/parcae/rdm_100m.py's choices
        assert (rdm['injection'], rdm['block'], rdm['depth_sampling'], rdm['prelude_norm'], rdm['readout'],
                rdm['init']) == ('linear', 'sandwich', 'per_batch', False, False, 'scaled')
        assert {k for k in rdm if rdm[k] != base[k]} == {'block', 'out_dir'} and base['block'] == 'prenorm'
        same = {k: rdm[k] for k in ('learning_rate', 'update_clipping', 'adam_atan2', 'schedule', 'max_iters')}
        for m in ('Parcae', 'GPT 6L'):
            assert {k: cfg[m][k] for k in same} == same
        assert cfg['GPT 6L']['init'] == 'scaled_zero'


def test_parcae_depth_runs_share_table_21s_recipe_and_their_controls_are_matched():
    spec = lab_spec.PAPERS['parcae']
    recipe = ('optimizer', 'muon_variant', 'learning_rate', 'muon_lr', 'beta1', 'beta2', 'eps', 'muon_weight_decay',
              'muon_wd_decay', 'schedule', 'warmup_iters', 'cooldown_frac', 'max_iters', 'dataset', 'block_size',
              'batch_size')
    for setting in spec['settings']:
        cfg = {m: resolve_config(lab_spec.muon_run(m, setting, 4e-3)[1]) for m in spec['depth']}
        want = {k: cfg['GPT 6L'][k] for k in recipe}
        assert all({k: c[k] for k in recipe} == want for c in cfg.values())
        assert (want['optimizer'], want['muon_variant'], want['learning_rate'], want['muon_lr']) == ('muon', 'parcae', 4e-3, None)
        assert cfg['GPT 6L']['block_size'] * cfg['GPT 6L']['batch_size'] == 768     # the same tokens per step
        sizes = {}
        for m, c in cfg.items():
            with torch.device('meta'):
                model = models.build_model(c['model'], {**c, 'vocab_size': 65})
            sizes[m] = (model.num_params(), model.flops_per_token(c['block_size']))
        assert abs(sizes['GPT 6L'][0] / sizes['Parcae'][0] - 1) < 1e-3 and sizes['Parcae mu=1'][0] == sizes['Parcae'][0]
        # the ceiling: twice the layers at the same width; a forward of Parcae at mean depth 4 applies
        # 2 + 4 x 2 + 2 = 12 blocks, as the GPT 12L (training FLOPs: backprop through 2 of the 4 steps)
        assert (cfg['GPT 12L']['n_layer'], cfg['GPT 12L']['n_embd']) == (12, cfg['GPT 6L']['n_embd'])
        assert sizes['GPT 6L'][1] < sizes['Parcae'][1] < sizes['GPT 12L'][1]
        mu1 = cfg['Parcae mu=1']
        assert (mu1['mean_recurrence'], mu1['mean_backprop_depth'], mu1['depth_sampling']) == (1, 1, 'fixed')
        assert {k for k in {**mu1, **cfg['Parcae']} if mu1.get(k) != cfg['Parcae'].get(k)} == \
            {'mean_recurrence', 'mean_backprop_depth', 'depth_sampling'}     # out_dir: the recipe's


@pytest.mark.slow   # 17-56 s on 2 cores: the suite keeps to CI's 15 minutes
def test_the_lt_fit_tells_the_four_forms_apart():
    T = list(range(1, 13))
    exp = [2.0 + 0.5 * math.exp(-0.7 * t) for t in T]
    power = [2.0 + 0.5 * t ** -1.2 for t in T]
    for curve, form in ((exp, 'L_inf + Z exp(-zT)'), (power, 'L_inf + Z T^-z')):
        fits = stats.fit_forms(T, curve, 4)
        assert fits[form]['in'] < 1e-12 and fits[form]['extrapolation'] < 1e-12, fits[form]
        assert min(f['extrapolation'] for k, f in fits.items() if k != form) > 100 * fits[form]['extrapolation']
    assert fits['Z T^-z']['in'] > 1e-7     # no floor cannot follow a curve that saturates at 2.0


def test_the_rate_grid_widens_until_its_best_lies_inside():
    trained = []

    def loss(lr):      # a bowl in log rate, lowest at 3.2e-2; a diverged run is NaN
        trained.append(lr)
        return math.nan if lr > 0.1 else (math.log(lr) - math.log(3.2e-2)) ** 2
    lrs, best = stats.bracket((4e-3, 8e-3, 1.6e-2), loss)
    assert best == pytest.approx(3.2e-2) and lrs[-1] == pytest.approx(6.4e-2) and len(lrs) == 5
    assert stats.bracket((4e-3, 8e-3, 1.6e-2), lambda lr: math.nan if lr < 8e-3 else lr)[1] == 8e-3
    assert len(stats.bracket((1.0, 2.0), lambda lr: -lr)[0]) == 7     # it stops at 7 rates


def untested(md):
    """A report without its Welch / bootstrap cells (their numbers are tested in the stats tests): the rows
    as they read before those cells, to compare with the rule's verdicts."""
    if isinstance(md, list):
        return [untested(line) for line in md]
    return re.sub(r' \| t [+-]?(?:inf|[\d.]+), df [-\d.]+, p [\d.]+; \[[^\]]*\]', '', md)


def seed_row(xs):
    m, sd = stats.mean_sd(xs)
    return {'mean': m, 'sd': sd, 'losses': xs}


def test_verdicts_for_a_loss_and_an_accuracy():
    low, high = seed_row([1.0, 1.01, 1.02]), seed_row([1.1, 1.11, 1.12])
    assert stats.verdict(low, high) == 'holds' and stats.verdict(high, low) == 'run lower'
    assert stats.verdict(high, low, higher=True) == 'holds' and stats.verdict(low, seed_row([1.01, 1.02, 1.03])) == 'tie'
    assert stats.verdict(low, seed_row([1.5])) == 'one seed'


def test_a_gap_beyond_two_sd_that_welch_does_not_show_is_not_shown():
    # sd 0.01 and 0 at n = 3: a gap of 0.021 passes two sd (0.020), but t = 0.021 / (0.01 / sqrt 3) = 3.64 on
    # df 2 is p 0.068; the bootstrap interval of the gap excludes 0 (the runs' ranges do not overlap)
    ref, run = seed_row([1.0, 1.01, 1.02]), seed_row([1.031, 1.031, 1.031])
    t, df, p = stats.welch(ref['losses'], run['losses'])
    assert (t, df) == (pytest.approx(-0.021 * 3 ** 0.5 / 0.01), pytest.approx(2.0)) and 0.05 < p < 0.08
    assert stats.verdict(ref, run) == f'not shown: 2-sd rule and bootstrap interval pass, Welch p {p:.3f}'
    assert stats.verdict(run, ref) == f'not shown (run lower): 2-sd rule and bootstrap interval pass, Welch p {p:.3f}'
    # five seeds a side at the same spread: the same gap passes all three
    assert stats.verdict(seed_row([1.0, 1.01, 1.02, 1.0, 1.02]), seed_row([1.031] * 5)) == 'holds'
    # both sides without spread: t is infinite, p 0, and a gap of any size holds
    t, df, p = stats.welch([1.0] * 3, [1.1] * 3)
    assert t == -math.inf and math.isnan(df) and p == 0.0
    assert stats.verdict(seed_row([1.0] * 3), seed_row([1.1] * 3)) == 'holds'
    assert stats.tests_cell(seed_row([1.0] * 3), seed_row([1.1] * 3)) == 't -inf, df -, p 0.000; [-0.100, -0.100]'


def simpson(f, a, b, n):
    h = (b - a) / n
    return h / 3 * (f(a) + f(b) + sum((4 if i % 2 else 2) * f(a + i * h) for i in range(1, n)))


def t_density(x, df):
    return math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
                    - (df + 1) / 2 * math.log1p(x * x / df))


def test_the_t_distribution_two_sided_p():
    # published values: t 2.0 on df 4 is p 0.1161, t 2.776 on df 4 the 5% point, 12.706 on df 1 too
    assert stats.t_two_sided(2.0, 4) == pytest.approx(0.1161, abs=5e-5)
    assert stats.t_two_sided(2.776, 4) == pytest.approx(0.05, abs=5e-5)
    assert stats.t_two_sided(12.706, 1) == pytest.approx(0.05, abs=5e-5)
    assert stats.t_two_sided(-2.0, 4) == stats.t_two_sided(2.0, 4) and stats.t_two_sided(0.0, 3) == 1.0
    # df 1 is the Cauchy: p = 1 - 2 atan(t) / pi, exactly
    for t in (0.3, 1.0, 7.0):
        assert stats.t_two_sided(t, 1) == pytest.approx(1 - 2 * math.atan(t) / math.pi, rel=1e-12)
    # large df: the normal, p = erfc(t / sqrt 2); the gap is O(1/df), about 1e-7 here
    for t in (0.5, 1.96, 3.0):
        assert stats.t_two_sided(t, 1e7) == pytest.approx(math.erfc(t / 2 ** 0.5), abs=1e-6)
    # against Simpson's rule on the density, p = 1 - 2 int_0^t: its error is below t h^4 max|f4| / 180 (f4 the
    # fourth derivative, at most the Cauchy's at 0, 24 / pi), at h = t / 2000 under 1e-11 for t < 4
    for t, df in ((0.7, 2.0), (2.0, 4.0), (3.64, 2.0), (2.5, 3.6), (1.3, 17.0)):
        naive = 1 - 2 * simpson(lambda x: t_density(x, df), 0.0, t, 2000)
        assert stats.t_two_sided(t, df) == pytest.approx(naive, abs=1e-10), (t, df)


def test_the_bootstrap_interval_against_the_exact_resampling_distribution():
    import itertools
    a, b = [1.0, 1.4, 2.1], [0.2, 0.9, 1.0]
    lo, hi = stats.bootstrap_gap(a, b)
    assert (lo, hi) == stats.bootstrap_gap(a, b)      # a fixed seed: a rebuild writes the same interval
    # n = 3 a side has 27 x 27 equally likely resamples: the exact distribution of the gap of means
    means = lambda xs: [sum(c) / 3 for c in itertools.product(xs, repeat=3)]  # noqa: E731
    gaps = sorted(x - y for x in means(a) for y in means(b))
    below = lambda v: sum(g < v - 1e-12 for g in gaps) / len(gaps)  # noqa: E731
    at_most = lambda v: sum(g <= v + 1e-12 for g in gaps) / len(gaps)  # noqa: E731
    # 10,000 draws put the 2.5% point's own quantile within 5 sd of 2.5%: sqrt(0.025 * 0.975 / 1e4) = 0.0016
    for v, q in ((lo, 0.025), (hi, 0.975)):
        assert below(v) <= q + 0.008 and at_most(v) >= q - 0.008, (v, q, below(v), at_most(v))
    assert min(gaps) <= lo < hi <= max(gaps)


def test_workspace_rows_are_parameter_matched():
    counts = [n_params(args, 257) for args in lab_spec.PAPERS['workspace']['runs'].values()]
    # matched again at block 128: within 0.04% of each other, as the paper's 0.918M rows (918,241 to 918,524)
    assert (max(counts) - min(counts)) / min(counts) < 4e-4, counts


def test_workspace_second_size_rows_are_matched_by_the_nearest_d_ff():
    # each row at 3/8 of its first-size width with its head count kept (heads and slots of 12), its d_ff the integer
    # nearest the workspace's count (the first size's 0.04% is finer than one d_ff step here: 129 to 516 parameters);
    # the data and recipe are the first size's but for the length
    first, small = lab_spec.PAPERS['workspace']['runs'], lab_spec.PAPERS['workspace']['small']['runs']
    assert list(small) == list(first)
    ws = n_params(small['workspace'], 257)

    def size(args):
        cfg = resolve_config(args + ['--vocab_size=257'])
        with torch.device('meta'):
            return models.build_model(cfg['model'], cfg).num_params()
    for name, args in small.items():
        cfg, big = resolve_config(args), resolve_config(first[name])
        gap = {d: abs(size(args + [f"--d_ff={cfg['d_ff'] + d}"]) - ws) for d in (-1, 0, 1)}
        assert gap[0] < min(gap[-1], gap[1]), (name, gap)
        assert (cfg['n_embd'] * 8, cfg['n_head'], cfg['n_embd'] // cfg['n_head']) == (big['n_embd'] * 3, big['n_head'], 12)
        changed = {k for k in cfg if cfg[k] != big[k]}
        assert changed <= {'n_embd', 'd_ff', 'slot_dim', 'out_dir', 'max_iters', 'lr_decay_iters', 'eval_interval'}, name
    assert resolve_config(small['workspace'])['slot_dim'] == 12     # m = the head width, as at the paper's sizes


def test_parcae_second_size_gpt_is_matched_and_shares_table_21s_recipe():
    spec = lab_spec.PAPERS['parcae']
    small = {m: resolve_config(spec['small']['runs'][m]) for m in lab_spec.PARCAE_TUNED}
    big = {m: resolve_config(lab_spec.muon_run(m, 'Shakespeare', 8e-3)[1]) for m in lab_spec.PARCAE_TUNED}
    # parameter-matched as the first size (within 0.1%: d_ff 200 is the nearest, one step is 576 parameters)
    assert abs(n_params(spec['small']['runs']['GPT 6L'], 65) / n_params(spec['small']['runs']['Parcae'], 65) - 1) < 1e-3
    for m in lab_spec.PARCAE_TUNED:
        changed = {k for k in small[m] if small[m][k] != big[m][k]}
        assert changed <= {'n_embd', 'n_head', 'head_dim', 'd_ff', 'max_iters', 'eval_interval', 'muon_momentum_warmup',
                           'out_dir'}, m
        assert small[m]['n_embd'] * 8 == big[m]['n_embd'] * 3 and small[m]['n_head'] == big[m]['n_head']
        for c in (small[m], big[m]):     # the authors' 300 of 21,362 steps of momentum warm-up, scaled to the run
            assert c['muon_momentum_warmup'] == round(300 / 21362 * c['max_iters'])
    assert small['GPT 6L']['learning_rate'] == small['Parcae']['learning_rate'] == spec['small']['tune']['Parcae']


def test_fon_and_its_transformers_are_parameter_matched():
    runs = lab_spec.PAPERS['fon']['runs']
    fon = n_params(runs['FON PC'], 66)
    for name in ('GPT RoPE', 'GPT ALiBi'):
        assert abs(n_params(runs[name], 66) / fon - 1) < 1e-3
    # the learned table (8x the training length) is the only difference of the learned-position GPT
    assert n_params(runs['GPT learned'], 66) - n_params(runs['GPT RoPE'], 66) == 8 * 128 * 128


def test_fon_and_its_mamba2_are_matched_in_parameters_and_flops():
    runs = lab_spec.PAPERS['fon']['runs']
    sizes = {}
    for name in ('FON PC', 'Mamba2'):
        cfg = resolve_config(runs[name])
        with torch.device('meta'):
            m = models.build_model(cfg['model'], {**cfg, 'vocab_size': 66})
        sizes[name] = (m.num_params(), m.flops_per_token(cfg['block_size']))
    assert abs(sizes['Mamba2'][0] / sizes['FON PC'][0] - 1) < 0.02, sizes    # 880,608 vs 891,908
    assert abs(sizes['Mamba2'][1] / sizes['FON PC'][1] - 1) < 0.01, sizes    # 6.92M vs 6.91M FLOPs per token
    assert all(lab_spec.PAPERS['fon']['seeds_by_run'][n] >= 3 for n in ('FON PC', 'Mamba2', 'GPT RoPE', 'GPT ALiBi'))


def test_a_diverged_run_is_a_result(lab, tmp_path, monkeypatch):
    out = str(tmp_path / 'run')
    os.makedirs(out)
    with open(os.path.join(out, 'log.jsonl'), 'w') as f:
        for it in (0, 10, 20):
            f.write(json.dumps({'kind': 'train', 'iter': it, 'loss': 3.0}) + '\n')

    def stopped(*a, **k):   # train.py's one-line stop (exit 2) after it logged
        raise subprocess.CalledProcessError(2, ['python', 'train.py', '--lr=1'])
    monkeypatch.setattr(lab, 'train', stopped)
    assert lab.train_or_diverge([], out, 1337)[1] == 20
    assert json.load(open(os.path.join(out, 'done.json')))['diverged'] == 20

    def crashed(*a, **k):   # any other failure is still an error
        raise subprocess.CalledProcessError(1, ['python', 'train.py'])
    monkeypatch.setattr(lab, 'train', crashed)
    with pytest.raises(subprocess.CalledProcessError):
        lab.train_or_diverge([], str(tmp_path / 'other'), 1337)


def test_stability_reads_the_largest_rise_after_warmup(tmp_path):
    out = str(tmp_path)
    losses = [4.0] + [2.0] * 12 + [2.9, 2.1]     # a spike of 0.9 at iter 130
    with open(os.path.join(out, 'log.jsonl'), 'w') as f:
        for i, l in enumerate(losses):
            f.write(json.dumps({'kind': 'train', 'iter': 10 * i, 'loss': l, 'spectral_radius': 0.5 + i / 100,
                                'state_norm': 10.0}) + '\n')
    s = lab_parcae.stability(out, warmup=50)
    assert s['rise'] == pytest.approx(0.9)
    assert s['rho_max'] == pytest.approx(0.5 + 14 / 100) and s['norm_end'] == 10.0


def test_a_missing_dataset_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(['workspace'], root=str(tmp_path))
    assert e.value.code == 2
    assert capsys.readouterr().err.startswith(
        'error: no data/shakespeare_byte: run python prepare_data.py shakespeare --tokenizer byte')
    os.makedirs(tmp_path / 'data' / 'shakespeare_char')
    (tmp_path / 'data' / 'shakespeare_char' / 'train.bin').write_bytes(b'')
    with pytest.raises(SystemExit) as e:     # parcae's battery setting needs the battery too
        cli.main(['parcae'], root=str(tmp_path))
    assert e.value.code == 2
    assert capsys.readouterr().err == 'error: no data/synthetic: run python prepare_data.py synthetic first\n'
    os.makedirs(tmp_path / 'data' / 'hops')     # the depth tables read a test split: its folder without one
    (tmp_path / 'data' / 'hops' / 'train.bin').write_bytes(b'')
    with pytest.raises(SystemExit) as e:
        cli.main(['depth'], root=str(tmp_path))
    assert e.value.code == 2
    assert capsys.readouterr().err == ('error: data/hops has no test split, which the tables read: run python '
                                       'prepare_data.py hops --n_test 1200 (its train and val stay as they are)\n')


def test_textnca_controls_and_the_receptive_field_of_the_schedule_runs():
    runs = lab_spec.PAPERS['textnca']['runs']
    staged = resolve_config(runs['staged (2, 8, 32)'])
    # Sec. 3.2: R_k = 1 + sum_{j<=k} Ts (w_j - 1); as 661 > 512 > 153, the field passes the block only in stage 3
    fields = [1 + sum(staged['Ts'] * (w - 1) for w in staged['windows'][:k]) for k in (1, 2, 3)]
    assert fields[1] < staged['block_size'] < fields[2], fields
    # SWin-TF-Staged: the same schedule as layer windows, two distinct layers per stage, no iteration
    swin = resolve_config(runs['SWin-TF-Staged (2, 2, 8, 8, 32, 32)'])
    assert tuple(swin['windows']) == tuple(w for w in staged['windows'] for _ in range(2)) and swin['n_layer'] == 6
    assert resolve_config(runs['SWin-TF-6L (w = 32)'])['windows'] == max(staged['windows'])   # every layer
    # the parameter-matched Transformer is within 2% of TextNCA; every run shares the data, batch and schedule
    assert abs(n_params(runs['Transformer-6L d84 (parameter-matched)'], 65) / n_params(runs['staged (2, 8, 32)'], 65)
               - 1) < 0.02
    keys = ('block_size', 'batch_size', 'max_iters', 'learning_rate', 'min_lr', 'warmup_iters', 'dataset')
    for name, args in runs.items():
        cfg = resolve_config(args)
        assert {k: cfg[k] for k in keys} == {k: staged[k] for k in keys}, name


def test_fon_infill_arms_start_from_their_own_pretraining():
    spec = lab_spec.PAPERS['fon']
    ft = spec['finetune']
    assert ft['FON PC + holes'][0] == 'FON PC' and ft['FON OD + holes'][0] == ft['FON AR + holes'][0] == 'FON AR/OD'
    coupling = {n: resolve_config(spec['runs'][src] + args)['coupling'] for n, (src, args) in ft.items()
                if n.startswith('FON')}
    assert coupling == {'FON PC + holes': 'PC', 'FON OD + holes': 'OD', 'FON AR + holes': 'AR',
                        'FON PC then OD + holes': 'OD'}
    assert ft['FON PC then OD + holes'][0] == 'FON PC' and spec['legs'][-1] >= spec['least'] >= 2000
    # three seeds of every arm (each fine-tunes its pretraining's); PC, OD and PC then OD must pass their LM prior
    assert all(spec['seeds_by_run'][src] >= 3 for src, _ in ft.values())
    assert set(spec['must_pass']) == {'FON PC + holes', 'FON OD + holes', 'FON PC then OD + holes'}
    assert resolve_config(spec['runs']['FON AR/OD'])['coupling'] == 'AR'
    assert list(spec['legs']) == sorted(spec['legs'])
    cfg = resolve_config(spec['runs']['FON PC'] + ft['FON PC + holes'][1])
    assert cfg['schedule'] == 'constant' and cfg['max_iters'] == spec['legs'][-1]   # legs resume one run
    # each seed from that seed's pretraining, at a third of that pretraining's own rate (Sec. 7: 1e-4 after 3e-4)
    rates = {'FON PC': 4e-3, 'FON AR/OD': 2e-3, 'GPT learned': 8e-3}
    by = {src: {'lr': lr, 'seeds': [1337, 1338], 'dirs': [f'pre/{src}/{s}' for s in (1337, 1338)]}
          for src, lr in rates.items()}
    for name, runs in lab_fon.finetunes(spec, by).items():
        src = ft[name][0]
        assert [seed for seed, _ in runs] == [1337, 1338]
        for seed, args in runs:
            assert args[-1] == f'--init_from=pre/{src}/{seed}'
            cfg = resolve_config(args[:-1])
            assert math.isclose(cfg['learning_rate'], rates[src] / 3, rel_tol=1e-5) and cfg['schedule'] == 'constant'
            assert cfg['model'] == resolve_config(spec['runs'][src])['model']


@pytest.mark.parametrize('paper', ['textnca', 'fon', 'workspace'])
def test_every_run_beside_a_bracketed_model_trains_at_a_bracketed_rate(paper):
    # an ablation at its config's rate beside its model at the bracketed one compares rates, not heads
    # (Parcae's Adam rows are Table 2's own fixed rates)
    for spec in (lab_spec.PAPERS[paper], lab_spec.PAPERS[paper]['small']):
        tune_as = spec.get('tune_as', {})
        assert [n for n in spec['runs'] if n not in spec['tune'] and n not in tune_as] == []
        assert set(tune_as.values()) <= set(spec['tune'])


def test_slot_gives_a_freed_slot_to_the_lowest_rank_waiting(lab, monkeypatch):
    lab.jobs = 1
    order, inside, most, hold = [], [0], [0], threading.Event()

    def run(rank):
        with lab.slot(rank):
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            order.append(rank)
            if rank == (0,):
                hold.wait()
            inside[0] -= 1
    threads = [threading.Thread(target=run, args=(r,)) for r in [(0,), (3,), (1, 2e-3), (1, 1e-3), (2,)]]
    threads[0].start()
    while order != [(0,)]:
        time.sleep(0.01)
    for t in threads[1:]:
        t.start()
    while len(lab.waiting) + len(order) < 5:    # every later rank waits for the one slot (or took it)
        time.sleep(0.01)
    hold.set()
    for t in threads:
        t.join()
    assert order == [(0,), (1, 1e-3), (1, 2e-3), (2,), (3,)] and most[0] == 1


def test_slot_kept_for_a_live_run_of_a_lower_rank_between_its_steps(lab, monkeypatch):
    # a run's bracket asks for its next rate a moment after its last one ends: the slot waits for it
    lab.jobs = 1
    order = []

    def run(rank):
        with lab.slot(rank):
            order.append(rank)
    later = threading.Thread(target=run, args=((1, 1337),))
    with lab.live(0):
        run((0, 1337))    # its first step
        later.start()
        while not lab.waiting and not order[1:]:
            time.sleep(0.01)
        run((0, 1338))    # its next, the slot still free for it
    later.join()
    assert order == [(0, 1337), (0, 1338), (1, 1337)] and lab.live_ranks == set()


def test_a_stop_frees_the_runs_waiting_and_starts_no_other(lab, monkeypatch, tmp_path):
    # a signal ends the runs under way; the threads waiting for a slot or queued must not start theirs
    lab.jobs = 1
    got = []

    def wait():
        try:
            with lab.slot((1,)):
                got.append('ran')
        except KeyboardInterrupt:
            got.append('gave up')
    with lab.slot((0,)):
        later = threading.Thread(target=wait)
        later.start()
        while not lab.waiting and not got:
            time.sleep(0.01)
        lab.stop()
        later.join(timeout=60)    # were it still waiting, it would wait for this slot: not forever
    assert got == ['gave up'] and lab.waiting == [] and lab.held == []
    made = tmp_path / 'made'
    with pytest.raises(KeyboardInterrupt):
        lab.run_with_progress([sys.executable, '-c', f'open({str(made)!r}, "w")'], 'x')
    assert not made.exists()


def test_a_failed_run_stops_the_others_at_once(lab, monkeypatch):
    # one job fails: the one under way is stopped (not left to train for hours) and the queued one trains
    # none (cancelled, or stopped at its start as train() is); without the stop the one under way would
    # wait out its 60 s and the queued one would train
    trained, stopped, done = [], [], {}

    def run(j):
        if j == 'fails':
            raise ValueError('bad config')
        if j == 'under way':
            stopped.append(lab.stopping.wait(timeout=60))
        lab.check_stopping()
        trained.append(j)
    with pytest.raises(ValueError, match='bad config'):
        lab.run_jobs(run, ['under way', 'fails', 'queued'], done, threads=2)
    assert stopped == [True] and trained == [] and done == {}


def test_seeds_are_the_papers_labels_then_from_1337():
    ws, tx = lab_spec.PAPERS['workspace'], lab_spec.PAPERS['textnca']
    assert lab_spec.seed_list(ws, 'workspace', 3) == [11, 23, 37]
    assert lab_spec.seed_list(ws, 'workspace', 5) == [11, 23, 37, 1337, 1338]      # --seeds=5
    assert lab_spec.seed_list(tx, 'Ts=8', 3) == [1337]                             # its own count
    assert lab_spec.seed_list(tx, 'Ts=8', 2) == [1337, 1338]                       # --seeds overrides it


def test_comparison_verdicts(lab, monkeypatch):
    monkeypatch.setattr(tables, 'counts', lambda out: (100, 90, 6e6))
    curve = [(0, 4.0), (500, 2.5), (1000, 2.0), (1500, 1.9)]
    rows = [{'run': n, 'seeds': [1], 'losses': ls, 'mean': stats.mean_sd(ls)[0], 'sd': stats.mean_sd(ls)[1]}
            for n, ls in (('ref', [1.00, 1.01, 1.02]), ('far', [1.10, 1.11, 1.12]), ('near', [1.01, 1.02, 1.03]),
                          ('ahead', [0.90, 0.91, 0.92]), ('single', [1.2]))]
    md = tables.comparison(lab, 'x', rows, {r['run']: [curve] for r in rows}, 'ref', [r['run'] for r in rows])
    verdict = {line.split(' | ')[0][2:]: line.split(' | ')[-1].rstrip(' |') for line in md[2:]}
    assert verdict == {'ref': '', 'far': 'holds', 'near': 'tie', 'ahead': 'run lower', 'single': 'one seed'}
    test = {line.split(' | ')[0][2:]: line.split(' | ')[-2] for line in md[2:]}
    assert test['far'] == 't -12.25, df 4.0, p 0.000; [-0.113, -0.087]' and test['single'] == '' == test['ref']
    assert all('2.000 (iter 1000)' in line for line in md[2:])     # at 2/3: the eval nearest 1000 of 1500


def test_a_run_read_along_the_way_continues_leg_by_leg(lab, tmp_path, monkeypatch):
    out = str(tmp_path / 'run')
    os.makedirs(out)
    calls = []

    def fake(cmd, name):   # train.py: writes the checkpoint
        calls.append(cmd)
        open(os.path.join(out, 'ckpt.pt'), 'w').close()
    monkeypatch.setattr(lab, 'run_with_progress', fake)
    lab.train(['c.py'], out, 1, upto=250)
    lab.train(['c.py'], out, 1, upto=250)          # that leg is done: nothing runs
    lab.train(['c.py'], out, 1, upto=750)
    assert len(calls) == 2
    assert '--max_iters=250' in calls[0] and '--init_from=resume' not in calls[0]
    assert calls[1][-2:] == ['--max_iters=750', '--init_from=resume']
    assert json.load(open(os.path.join(out, 'done.json')))['upto'] == 750


@pytest.mark.parametrize('pc_passes, stop', [(4000, 4000), (750, 2500), (None, 6000)])
def test_infill_arms_train_leg_by_leg_until_every_revising_arm_passes_its_prior(lab, tmp_path, monkeypatch, pc_passes, stop):
    # made-up readings (nothing trains): each seed's LM prior is its own; OD passes it from 1,500, PC and PC then OD
    # from pc_passes (PC then OD's first seed only then), AR and the GPT never. The legs stop at the first leg of
    # 2,000 or more where every seed of PC, OD and PC then OD is past its prior, or at the last
    monkeypatch.chdir(tmp_path)
    spec, trained = lab_spec.PAPERS['fon'], []
    seeds = {name: [1337] if 'GPT' in name else [1337, 1338, 1339] for name in spec['finetune']}
    ft = {name: [(seed, ['c.py', f'--init_from=pre/{src}-{seed}']) for seed in seeds[name]]
          for name, (src, _) in spec['finetune'].items()}
    after = {'FON PC + holes': (-0.05, 0.03), 'FON OD + holes': (-0.05, 0.06), 'FON AR + holes': (-0.04, -0.04),
             'FON PC then OD + holes': (0.001, 0.031), 'GPT learned + holes': (-0.10, -0.10)}

    def train(args, out, seed, iters=None, upto=None):
        trained.append((out, seed, upto))
        return upto / 10

    def eval_json(out, file, *args, leg=None):
        name = next(n for n in spec['finetune'] if out == lab.run_dir('fon', n, int(out[-4:])))
        seed = int(out[-4:])
        assert f'--baseline_from=pre/{spec["finetune"][name][0]}-{seed}' in args and file == 'infill.json'
        prior = 0.50 + 0.001 * (seed - 1337)
        late = leg >= (1500 if name == 'FON OD + holes' else pc_passes or math.inf)
        return {'holes': 1000, 'infill_acc': prior + after[name][late] + 0.002 * (seed - 1338),
                'unholed_prefix_acc': 0.6, 'pretrained_prefix_acc': prior}
    monkeypatch.setattr(lab, 'train', train)
    monkeypatch.setattr(lab, 'eval_json', eval_json)
    fill, secs = lab_fon.finetune_legs(lab, ft, spec)
    legs = [leg for leg in spec['legs'] if leg <= stop]
    assert sorted(trained) == sorted((lab.run_dir('fon', name, seed), seed, leg)
                                     for name in ft for seed in seeds[name] for leg in legs)
    assert secs['FON PC + holes'] == [stop / 10] * 3 and [leg for leg, _ in fill['FON AR + holes']] == legs
    md = lab_fon.infill_md(fill, spec['must_pass'])
    rows = {line.split(' | ')[0][2:]: line.split(' | ') for line in md if line.startswith('| ')}
    col = rows['arm'].index('passed its prior at')
    passed = {name: row[col] for name, row in rows.items() if name in spec['finetune']}
    late = f'{pc_passes} it' if pc_passes else f'not by {stop} it'
    assert passed == {'FON PC + holes': late, 'FON OD + holes': '1500 it', 'FON AR + holes': f'not by {stop} it',
                      'FON PC then OD + holes': late, 'GPT learned + holes': f'not by {stop} it'}
    verdicts = {name: [row[-3], row[-1]] for name, row in rows.items() if name in spec['finetune']}
    if pc_passes:
        # at the last leg PC fills 53.1 +- 0.3 (its prior 50.1 +- 0.1): OD ahead beyond 2 sd, AR behind, PC then OD
        # within; the GPT has one seed, so its cell is an interval over holes and no verdict
        pc = rows['FON PC + holes']
        assert pc[3 + len(legs) - 1] == '53.1 +- 0.3%' and pc[-6] == '50.1 +- 0.1%'
        assert verdicts == {'FON PC + holes': ['', ' |'], 'FON OD + holes': ['-3.0 points', 'run higher |'],
                            'FON AR + holes': ['+7.0 points', 'holds |'],
                            'FON PC then OD + holes': ['-0.1 points', 'tie |'],
                            'GPT learned + holes': ['+13.3 points', 'one seed |']}
        assert rows['GPT learned + holes'][3 + len(legs) - 1] == '39.8% [36.8, 42.9]'
        assert md[-1].startswith(f'The legs stopped at {stop} iterations')
    else:
        assert md[-1].startswith('At the last leg (6000 iterations) not every seed of PC, OD, PC then OD fills')


def test_an_arm_fine_tuned_from_another_pretraining_is_not_reused(lab, tmp_path, monkeypatch, capsys):
    # FON PC retrained at its bracketed rate: the finished fine-tune of its old folder is refused, nothing trains
    monkeypatch.chdir(tmp_path)
    spec = lab_spec.PAPERS['fon']
    ft = {name: [(1337, ['c.py', f"--init_from={lab.run_dir('fon', lab_spec.rated(src, 4e-3), 1337)}"])]
          for name, (src, _) in spec['finetune'].items()}
    out = lab.run_dir('fon', 'FON PC + holes', 1337)
    os.makedirs(out)
    old = lab.run_dir('fon', 'FON PC', 1337)
    json.dump({'seconds': 1.0, 'upto': 1500, 'command': f'train.py c.py --init_from={old} --out_dir={out}'},
              open(os.path.join(out, 'done.json'), 'w'))
    monkeypatch.setattr(lab, 'train', lambda *a, **k: pytest.fail('trained'))
    with pytest.raises(SystemExit) as e:
        lab_fon.finetune_legs(lab, ft, spec)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith(f'error: {out} was fine-tuned from another run than ')
    assert len(err.strip().splitlines()) == 1
    # the same pretraining at another fine-tuning rate than the one it was recorded with: refused too
    now = lab.run_dir('fon', lab_spec.rated('FON PC', 4e-3), 1337)
    json.dump({'seconds': 1.0, 'upto': 1500, 'command': f'train.py c.py --init_from={now} --out_dir={out}'},
              open(os.path.join(out, 'done.json'), 'w'))
    ft = {'FON PC + holes': [(1337, ['c.py', '--learning_rate=0.00133333', f'--init_from={now}'])]}
    with pytest.raises(SystemExit):
        lab_fon.finetune_legs(lab, ft, spec)
    assert capsys.readouterr().err == (f'error: {out} was fine-tuned at another rate than 0.00133333: move it '
                                       'aside to fine-tune it again as asked\n')


def test_the_extrapolation_section_tests_every_seed_of_each_run_at_the_longest_length():
    # Sec. 4.3's claim is a comparison at 8x the training length: each run over its seeds, FON's perplexity
    # change against each control's and FON's loss there against its own at the training length, each with
    # the three-part rule (the section used to read seed 1337 alone and could only say 'holds (one seed)')
    def run(*seeds):    # per seed its loss at 128 and at 1024; 256 and 512 between
        return [{'train_length': 128, 'rows': [{'length': n, 'loss': x, 'delta_pct': 100 * (math.exp(x - a) - 1)}
                                               for n, x in zip((128, 256, 512, 1024), (a, a, b, b))]}
                for a, b in seeds]
    ext = {'FON PC': run((1.545, 1.520), (1.546, 1.5215), (1.543, 1.5175)),    # -2.47 +- 0.05%
           'GPT RoPE': run((1.655, 2.70), (1.658, 2.71), (1.654, 2.69)),       # +184%
           'GPT ALiBi': run((1.690, 1.666), (1.694, 1.668), (1.688, 1.666))}   # -2.37 +- 0.20%: within FON's spread
    md = lab_fon.extrapolation_md(ext)
    cols = 2 + len(ext['FON PC'][0]['rows'])     # run, seeds, one per length
    table = [line.split(' | ') for line in md if line.startswith('| ') and line.count(' | ') == cols - 1]
    assert [r[:3] for r in table[1:]] == [['| FON PC', '3', '1.545 +- 0.002 (+0.0%)'],
                                          ['| GPT RoPE', '3', '1.656 +- 0.002 (+0.0%)'],
                                          ['| GPT ALiBi', '3', '1.691 +- 0.003 (+0.0%)']]
    verdicts = {line.split(' | ')[0][2:]: line.split(' | ')[-1][:-2] for line in md
                if line.startswith('| ') and line.count(' | ') == 4 and not line.startswith('| run')}
    fon_change = stats.mean_sd([100 * (math.exp(b - a) - 1) for a, b in ((1.545, 1.520), (1.546, 1.5215),
                                                                          (1.543, 1.5175))])
    assert f"| FON PC | {fon_change[0]:+.2f} +- {fon_change[1]:.2f}% |  |  |  |" in md
    assert verdicts == {'FON PC': '', 'GPT RoPE': 'holds', 'GPT ALiBi': 'tie'}
    assert md[-1].endswith(": holds ('holds': lower at 8x).")        # 1.520 +- 0.002 against 1.545 +- 0.002
    ext['FON PC'] = run((1.545, 1.60), (1.546, 1.61), (1.543, 1.59))
    assert lab_fon.extrapolation_md(ext)[-1].endswith(": lower at 128 ('holds': lower at 8x).")


def test_a_finished_run_from_other_weights_or_at_another_rate_is_refused_not_kept(lab, tmp_path, monkeypatch, capsys):
    # a depth stage's folder is named by its place in the curriculum; the same name reached from another stage
    # (a repeat rule changed, a record retrained to other weights) must not pass for the one asked for
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(lab, 'run_with_progress', lambda *a: pytest.fail('trained'))
    out = lab_depth.stage_dir(lab, 'GPT 3L', 1e-3, 3, 1337, 1)
    os.makedirs(out)
    old, new = (lab_depth.stage_dir(lab, 'GPT 3L', 1e-3, n, 1337, r) for n, r in ((2, 1), (3, 0)))
    json.dump({'seconds': 5.0, 'command': f'train.py c.py --learning_rate=0.001 --init_from={old} --out_dir={out}'},
              open(os.path.join(out, 'done.json'), 'w'))
    assert lab.train(['c.py', f'--init_from={old}'], out, 1337) == 5.0    # its own source: kept
    assert lab.train(['c.py', '--learning_rate=0.001', f'--init_from={old}'], out, 1337) == 5.0
    for args, how in (([f'--init_from={new}'], f'from another run than {new}'),
                      (['--learning_rate=0.002', f'--init_from={old}'], 'at another rate than 0.002')):
        with pytest.raises(SystemExit) as e:
            lab.train(['c.py', *args], out, 1337)
        err = capsys.readouterr().err
        assert e.value.code == 2
        assert err == f'error: {out} was trained {how}: move it aside to train it again as asked\n'


def test_battery_runs_are_table_8s_models_on_the_battery_recipe():
    # FON PC, a causal GPT, a GPT trained causal=False (the BERT-style encoder, holed from its first step) and
    # Mamba2, each config/fon/fon_cpu_battery.py's d 64, L 2 model, each fine-tuned as fon_cpu_battery_ft.py does
    # Table 5's arms beside them: OD from a drafting-only pretraining, PC then OD from PC's, three seeds each
    spec = lab_spec.PAPERS['battery']
    assert list(lab_spec.PAPERS)[-1] == 'battery' and spec['datasets'] == [('synthetic', 'synthetic')]
    assert spec['seeds'] == 3 and {src for src, _ in spec['finetune'].values()} == set(spec['runs'])
    assert set(spec['arms']) <= set(spec['finetune']) and spec['arm_tasks'] == ('ind_r', 'mem_r')
    coupling = {ft: resolve_config(spec['runs'][src] + extra).get('coupling', 'PC (the default)')
                for ft, (src, extra) in spec['finetune'].items() if ft in spec['arms']}
    assert coupling == {'FON PC + holes': 'PC (the default)', 'FON OD + holes': 'OD', 'FON PC then OD + holes': 'OD'}
    assert resolve_config(spec['runs']['FON AR/OD'])['coupling'] == 'AR' and fon.FONConfig.coupling == 'PC'
    assert [spec['finetune'][ft][0] for ft in spec['arms']] == ['FON PC', 'FON AR/OD', 'FON PC']
    ft = resolve_config(['config/fon/fon_cpu_battery_ft.py'])
    assert ft['max_iters'] >= 2000
    for name, (src, extra) in spec['finetune'].items():
        pre = resolve_config(spec['runs'][src])
        tuned = resolve_config(spec['runs'][src] + extra)
        bidirectional = 'bidirectional' in name
        assert (pre['dataset'], pre['block_size'], pre['n_embd'], pre['n_layer'], pre['max_iters']) == \
            ('synthetic', 96, 64, 2, 400), name
        assert pre['causal'] == tuned['causal'] == (not bidirectional)
        assert pre['p_fill'] == (1.0 if bidirectional else 0.0)
        same = ('p_fill', 'hole_stride', 'p_hole', 'learning_rate', 'schedule', 'warmup_iters', 'max_iters',
                'eval_interval')
        assert {k: tuned[k] for k in same} == {k: ft[k] for k in same}, name
        assert tuned['model'] == pre['model'] == ('fon' if 'FON' in name else 'mamba2' if 'Mamba2' in name else 'gpt')
    # the two GPTs are one model (RoPE both) but for the reading they are trained for
    gpts = [resolve_config(spec['runs'][name]) for name in ('GPT causal', 'GPT bidirectional (causal=False)')]
    assert gpts[0]['pos'] == gpts[1]['pos'] == 'rope'
    assert {k for k in gpts[0] if gpts[0][k] != gpts[1][k]} == {'out_dir', 'causal', 'p_fill'}


def test_wilson_interval():
    assert stats.wilson(50, 100) == pytest.approx((0.4038, 0.5962), abs=1e-4)
    lo, hi = stats.wilson(0, 375)
    assert lo == 0 and hi == pytest.approx(0.0101, abs=1e-4)      # what an all-wrong task's row shows
    assert stats.wilson(375, 375)[1] == 1 and all(math.isnan(x) for x in stats.wilson(0, 0))


def test_battery_report_pools_seeds_and_checks_the_claim(lab, tmp_path, monkeypatch):
    # the report alone, from made-up readings (nothing trains): a bidirectional GPT right everywhere, FON right
    # (0.9) wherever its look-ahead reaches and wrong on the far five, the causal readers wrong everywhere
    import battery
    monkeypatch.chdir(tmp_path)
    trained = []

    def train(args, out, seed, iters=None):
        trained.append((out, seed))
        os.makedirs(out, exist_ok=True)
        json.dump({'model': 'gpt', 'causal': 'bidirectional' not in out}, open(os.path.join(out, 'config.json'), 'w'))
        return 60.0

    def reading(out, file, *args):
        bi, fon = 'bidirectional' in out, 'FON' in out
        rows = {t: {'n': 10, 'chance': battery.CHANCE[t], 'future': t in battery.FUTURE} for t in battery.TASKS}
        for t, r in rows.items():
            r.update({'fill_bidirectional': 1.0} if bi else
                     {'fill': 0.9 if fon and t not in battery.FAR else 0.0, 'generate': 0.0})
        return {'tasks': rows}
    monkeypatch.setattr(lab, 'train', train)
    monkeypatch.setattr(lab, 'evaluate', lambda out, *a: {'loss': 2.0})
    monkeypatch.setattr(lab, 'eval_json', reading)
    rows, fig, md = lab_battery.battery(lab, 2)
    spec = lab_spec.PAPERS['battery']
    assert [r['run'] for r in rows] == list(spec['runs']) + list(spec['finetune']) and len(rows) == 11
    assert all(r['losses'] == [2.0, 2.0] and r['seconds'] == 120.0 for r in rows)
    # every pretraining trained before any chain that starts from it: each once per seed, then by its chains
    assert len(set(trained[:10])) == 10 and not any('holes' in out for out, _ in trained[:10])
    assert rows[2]['model'] == 'gpt, causal=False' and rows[1]['model'] == 'gpt'
    lines = md.splitlines()
    table = [line for line in lines if line.startswith('| ')]
    assert len(table) == 1 + len(battery.TASKS) + 3 + 1 + 3 and '| ind_r_far (future, far) | 0.000 | 20 |' in md
    assert '| FON PC then OD + holes | 2 | 0.900 +- 0.000 | 0.900, 0.900 | +0.000 | tie | 0.900 +- 0.000 |' in untested(md)
    assert '| add | 0.005 | 20 | 0.900 [0.699, 0.972] | 0.000 [0.000, 0.161] | 1.000 [0.839, 1.000] |' in md
    assert "| Table 8 six, pooled | 0.171 | 120 | 0.900 " in md and 'Per seed, fill' in md
    assert "above the causal GPT's on 6 of 6 Table 8 tasks, 5 of the 5 future-dependent ones and 0 of their 5 far" in md
    over = md.split('Over seeds, where the pooled intervals differ')[1].split('\n')[0]
    assert over.count(' holds (Welch p 0.000)') == 11 and 'ind_r_far' not in over    # every seed 0.9 against 0.0
    assert "bidirectional GPT's on 16 of 16 tasks; the bidirectional GPT above every other model on 5." in md
    assert "causal GPT's fill on 10 of 10, its generation on 10 of 10, Mamba2's fill on 10 of 10." in md
    assert "FON PC at chance on 5 of 5 far and 0 of 5 near; the bidirectional GPT above chance on 5 of 5 far" in md


def test_a_pooled_fill_lead_is_tested_again_over_seeds():
    # pooled over seeds, FON's 0.42 on ind_r against the causal GPT's 0.00 is a difference of intervals; over
    # seeds, one of FON's three reads 0.00, so the three-part rule finds no gap (the README's row says so)
    class Counts:
        per_seed = {('FON PC fill', 'ind_r'): [0.856, 0.0, 0.413], ('GPT causal fill', 'ind_r'): [0.0, 0.0, 0.0],
                    ('FON PC fill', 'sort_rel'): [0.58, 0.38, 0.51], ('GPT causal fill', 'sort_rel'): [0.20, 0.23, 0.23]}
    assert lab_battery.over_seeds(Counts, 'ind_r') == 'ind_r tie (Welch p 0.229)'
    assert lab_battery.over_seeds(Counts, 'sort_rel') == 'sort_rel holds (Welch p 0.041)'


def test_battery_arms_on_ind_r_and_mem_r_over_seeds():
    # made-up readings: on ind_r OD trails PC beyond two sd and PC then OD ties it; on mem_r OD leads beyond
    # two sd and PC then OD trails; one seed has no verdict
    fills = {'FON PC + holes': ((0.89, 0.90, 0.91), (0.27, 0.28, 0.29)),
             'FON OD + holes': ((0.50, 0.55, 0.60), (0.40, 0.41, 0.42)),
             'FON PC then OD + holes': ((0.88, 0.90, 0.92), (0.20, 0.21, 0.22))}
    seeds = range(1337, 1340)
    done = {(arm, seed): (None, None, {'tasks': {t: {'fill': fills[arm][i][seed - 1337], 'n': 375, 'chance': c}
                                                 for i, (t, c) in enumerate((('ind_r', 0.0), ('mem_r', 0.1)))}})
            for arm in fills for seed in seeds}
    md = untested(lab_battery.battery_arms_md(done, seeds))
    rows = [line for line in md if line.startswith('| ')]
    assert rows[0] == ('| arm | seeds | ind_r fill (chance 0.000) | per seed | PC - arm | '
                       f'{stats.TESTS_HEAD} | verdict | mem_r fill (chance 0.100) | per seed | PC - arm | '
                       f'{stats.TESTS_HEAD} | verdict |')
    assert rows[1:] == [
        '| FON PC + holes | 3 | 0.900 +- 0.010 | 0.890, 0.900, 0.910 |  |  |  | 0.280 +- 0.010 | '
        '0.270, 0.280, 0.290 |  |  |  |',
        '| FON OD + holes | 3 | 0.550 +- 0.050 | 0.500, 0.550, 0.600 | +0.350 | holds | 0.410 +- 0.010 | '
        '0.400, 0.410, 0.420 | -0.130 | run higher |',
        '| FON PC then OD + holes | 3 | 0.900 +- 0.020 | 0.880, 0.900, 0.920 | +0.000 | tie | 0.210 +- 0.010 | '
        '0.200, 0.210, 0.220 | +0.070 | holds |']
    one = [line for line in lab_battery.battery_arms_md(done, range(1337, 1338)) if line.startswith('| FON OD')]
    assert one == ['| FON OD + holes | 1 | 0.500 | 0.500 | +0.390 |  | one seed | 0.400 | 0.400 | -0.130 |  | one seed |']


def test_a_looped_pairs_line_groups_its_depths_by_the_verdict_each_table_row_draws():
    def side(*xs):
        m, sd = stats.mean_sd(xs)
        return {'mean': m, 'sd': sd, 'xs': list(xs)}
    control = side(0.40, 0.42, 0.44, 0.46, 0.48)    # trained at depth one: the same at every test-time depth
    model = {1: side(0.42, 0.45, 0.43, 0.47, 0.44), 2: side(0.10, 0.12, 0.14, 0.11, 0.13),
             3: side(0.98, 0.30, 0.95, 0.90, 0.99), 4: side(0.98, 0.98, 0.90, 0.97, 1.00),
             6: side(0.05, 0.10, 0.60, 0.08, 0.12), 8: side(0.98, 0.98, 0.90, 0.97, 1.00)}
    verdicts = {v: stats.verdict(model[v], control, higher=True) for v in model}
    assert [verdicts[v].split(':')[0] for v in model] == ['tie', 'run higher', 'not shown', 'holds',
                                                         'not shown (run higher)', 'holds']
    assert lab_depth.pair_line('Parcae', 'Parcae mu=1', 'num_recur', verdicts, 5) == (
        '**Parcae against Parcae mu=1** (5 seeds a side, exact match at three lookups or more): tie at num_recur 1; '
        'Parcae mu=1 ahead at num_recur 2; not shown at num_recur 3; holds at num_recur 4, 8; '
        'not shown (Parcae mu=1 ahead) at num_recur 6.')


def test_the_depth_tables_draw_no_verdict_before_every_reported_seed_is_recorded(lab, tmp_path, monkeypatch):
    # --rebuild where the records hold the rate seed's bracket, two reported seeds of the GPT 3L and one of the
    # 6L: the runs they hold are listed with their readings, the rest pending, and no verdict is drawn
    monkeypatch.chdir(tmp_path)
    lab.opts.rebuild, lab.opts.results = True, str(tmp_path / 'results')    # the gate's table, once decided
    best, have = {'GPT 3L': 1e-3, 'GPT 6L': 2e-3}, {('GPT 3L', 1338), ('GPT 3L', 1339), ('GPT 6L', 1338)}

    def run(lab, name, lr, seed):
        out = str(tmp_path / f'{name}-{lr}-{seed}')
        made_up_run(lab_spec.PAPERS['depth']['runs'][name], out, 44)
        if seed == lab_spec.RATE_SEED:
            return 60.0, 1 + abs(math.log(lr / best[name])), {}, [(None, out)]
        if (name, seed) not in have:
            raise Unrecorded(out)
        right = (lambda k: 0.9) if name == 'GPT 6L' else (lambda k: k / 10)
        return 60.0, 0.5, {f'hop{k}': right(k) + (seed - 1338) / 100 for k in range(1, 7)}, [(None, out)]
    monkeypatch.setattr(lab_depth, 'depth_run', run)
    rows, fig, md = lab_depth.depth(lab, 5)
    assert [(r['run'], r['seeds']) for r in rows] == [('GPT 3L (lr 0.001)', [1338, 1339]), ('GPT 6L (lr 0.002)', [1338])]
    assert md.startswith('**Pending: no verdict yet.**') and '| ' not in md and 'Gate' not in md
    assert 'the records hold 3 of those 10 runs so far' in md
    assert ("- GPT 3L (lr 0.001; seed 1337's answer loss 0.0005 1.693, 0.001 1.000, 0.002 1.693, 0.004 2.386): "
            "seed 1338: k = 1 0.100, k = 2 0.200, k = 3 0.300, k = 4 0.400, k = 5 0.500, k = 6 0.600; seed 1339: "
            "k = 1 0.110, k = 2 0.210, k = 3 0.310, k = 4 0.410, k = 5 0.510, k = 6 0.610; pending: 1340, 1341, 1342") in md
    assert "- GPT 6L (lr 0.002; " in md and md.endswith('pending: 1339, 1340, 1341, 1342')
    # the gate recorded whole, no looped run yet: the gate's table and verdict, then what the looped pairs lack
    have |= {(name, seed) for name in best for seed in range(1338, 1343)}
    lab.opts.rebuild = True
    lab.stopping.clear()    # the failure above stopped the lab

    def looped(lab, name, lr, seed):    # of the looped runs, one rate of Parcae's bracket is recorded
        if (name, lr, seed) == ('Parcae', 1e-3, lab_spec.RATE_SEED):
            return 60.0, 0.25, {}, [(None, str(tmp_path / 'parcae'))]
        raise Unrecorded(name)
    monkeypatch.setattr(lab_depth, 'depth_run', lambda lab, name, *a: (run if name in best else looped)(lab, name, *a))
    rows, fig, md = lab_depth.depth(lab, 5)
    assert [r['run'] for r in rows] == ['GPT 3L (lr 0.001)', 'GPT 6L (lr 0.002)'] and '**Gate: holds**' in md
    assert md.split('**Gate')[1].count('**Pending: no verdict yet.**') == 1 and 'hold 0 of those 40 runs' in md
    assert md.endswith('\n'.join(f"- {n}: rate not chosen yet (seed 1337's answer loss so far: "
                                 f"{'0.001 0.250' if n == 'Parcae' else 'none'})"
                                 for n in lab_spec.PAPERS['depth']['looped']))
    # the figure keeps the decided gate (its GPTs' exact match, their brackets) beside the looped runs' progress
    assert [len(a.lines) > 0 for a in fig.axes] == [True, True, False] and fig.axes[2].has_data()
    assert fig.axes[2].get_title() == 'reported seeds recorded'
    assert len(fig.axes[2].patches) == len(lab_spec.PAPERS['depth']['looped'])
    # TextNCA residual read no listing at any rate, its control read it: the control's seeds are not to come
    def unread(lab, name, lr, seed):
        if seed == lab_spec.RATE_SEED and name == 'TextNCA residual':
            return 60.0, 3.0, None, [(1, str(tmp_path / 'nca'))]
        if seed == lab_spec.RATE_SEED and name == 'TextNCA residual Ts=1':
            return 60.0, 1 + abs(math.log(lr / 2e-3)), {}, [(None, str(tmp_path / 'nca1'))]
        return looped(lab, name, lr, seed)
    monkeypatch.setattr(lab_depth, 'depth_run', lambda lab, name, *a: (run if name in best else unread)(lab, name, *a))
    rows, fig, md = lab_depth.depth(lab, 5)
    assert 'hold 0 of those 30 runs' in md and '- TextNCA residual:' not in md and '- TextNCA residual Ts=1 (' not in md
    assert ("- TextNCA residual Ts=1 read the listing (seed 1337's answer loss 0.001 1.693, 0.002 1.000, 0.004 1.693; "
            "its rate 0.002), but TextNCA residual at no rate, so TextNCA residual Ts=1's reported seeds were not "
            "trained: they decide nothing alone") in md
    assert len(fig.axes[2].patches) == len(lab_spec.PAPERS['depth']['looped']) - 2
    assert ("- TextNCA residual ended its one-hop stages (seed 1337, 3 passes) at 3.000 at 0.001, 3.000 at 0.002, "
            "3.000 at 0.004: no better than a uniform guess among the listed letters (1.946), so the listing that "
            "every hop looks up was never read, and the curriculum stopped there: its pair is not decidable on this "
            "task") in md
    nca = ('TextNCA residual', 'TextNCA residual Ts=1')
    assert lab_depth.pending(nca, dict(zip(nca, (None, 2e-3))), [1338], collections.defaultdict(lambda: None)) == []
    lab.opts.rebuild = False     # without --rebuild a run the records lack is trained, not left pending
    with pytest.raises(Unrecorded):
        lab_depth.depth(lab, 5)


def test_a_depth_stage_is_judged_by_the_weights_its_readings_read(lab, tmp_path, monkeypatch):
    # a reported seed whose stages the records hold (trained on another CPU, each learned at once): each is
    # trained again for its checkpoint before the repeat rule reads it, and where the retrain of stage 2 ends
    # elsewhere than its record the curriculum goes on from a stage 2 of its own, trained anew (the retrain's own
    # curve just short of learned, so it repeats), never from weights whose curve the rule did not read. Under
    # --rebuild the records make the same path. A seed whose test readings are recorded trains nothing again.
    import battery
    monkeypatch.chdir(tmp_path)
    bar = lambda n: math.log(7) / (2 * n)    # noqa: E731 (hops 1 ... n - 1 exact, hop n at chance among 7: half)
    retrained, trained = [], []

    def train(args, out, seed, iters=None):
        n = int(next(a for a in args if a.startswith('--dataset=hops'))[len('--dataset=hops'):] or 6)
        if os.path.isfile(os.path.join(out, 'log.jsonl')):    # restored from its record: nothing trains
            return 0.0
        trained.append(out)
        os.makedirs(out, exist_ok=True)
        json.dump({'argv': ['train.py', *args]}, open(os.path.join(out, 'done.json'), 'w'))
        loss = bar(n) + 1e-3 if out.endswith('_up_to_2_hops_b-s1338') else bar(n) - 1e-3
        with open(os.path.join(out, 'log.jsonl'), 'w') as f:
            f.write(json.dumps({'kind': 'eval', 'iter': 1000, 'val_loss': loss}) + '\n')
        return 60.0

    def ensure_ckpt(out):
        if out in trained:    # trained here: its checkpoint is here
            return
        retrained.append(out)
        if out.endswith('_up_to_2_hops-s1338'):    # stage 2's first pass, on this CPU: ends elsewhere
            os.makedirs(os.path.join(out, 'eval'), exist_ok=True)
            json.dump({'record': [[1000, bar(2) - 1e-3]], 'retrained': [[1000, bar(2) + 1e-3]]},
                      open(os.path.join(out, 'eval', 'retrain.json'), 'w'))
            lab.records.keep(lab.record_of(out), {'done': json.load(open(os.path.join(out, 'done.json'))),
                                                  'eval': {'retrain.json': {}}})
    monkeypatch.setattr(lab, 'train', train)
    monkeypatch.setattr(lab, 'ensure_ckpt', ensure_ckpt)
    monkeypatch.setattr(lab, 'evaluate', lambda out, *a: {'loss': 0.1})
    monkeypatch.setattr(lab, 'eval_json', lambda out, file, *a, sub=None: {
        'tasks': {t: {'generate': 1.0} for t in battery.HOP_TASKS}})
    spec = lab_spec.PAPERS['depth']
    base = [*spec['runs']['GPT 6L'], *spec['stage'], '--learning_rate=0.002', '--min_lr=0.0002']
    src = []
    for n in (1, 2, 3, 4, 5, None):    # the other CPU's records: each stage learned at once
        out = lab_depth.stage_dir(lab, 'GPT 6L', 2e-3, n, 1338)
        train([*base, f'--dataset=hops{n or ""}', *src], out, 1338)
        lab.records.keep(lab.record_of(out), {'done': json.load(open(os.path.join(out, 'done.json'))), 'eval': {}})
        src = [f'--init_from={out}']
    trained[:] = []
    *_, stages = lab_depth.depth_run(lab, 'GPT 6L', 2e-3, 1338)
    new = [(1, 0, ''), (2, 0, ''), (2, 0, 'b'), (2, 1, ''), (3, 1, ''), (4, 1, ''), (5, 1, ''), (None, 1, '')]
    got = [lab_depth.stage_dir(lab, 'GPT 6L', 2e-3, n, 1338, r, alt) for n, r, alt in new]
    assert [d for _, d in stages] == [got[0], *got[2:]]    # the retrained stage 2 is left behind
    assert retrained == got[:2] and trained == got[2:]
    # under --rebuild the records (stage 2's retrain among them) make the same path without training
    os.remove(os.path.join(got[1], 'eval', 'retrain.json'))
    lab.opts.rebuild, trained[:] = True, []
    monkeypatch.setattr(lab, 'train', lambda args, out, seed: 0.0)
    assert lab_depth.depth_run(lab, 'GPT 6L', 2e-3, 1338)[3] == stages
    lab.opts.rebuild, retrained[:] = False, []
    task = lab_depth.stage_dir(lab, 'GPT 6L', 2e-3, None, 1339, 0)
    lab.records.keep(lab.record_of(task), {'done': {'seconds': 60.0}, 'eval': {'test/battery.json': {}}})
    monkeypatch.setattr(lab, 'train', train)
    assert [n for n, _ in lab_depth.depth_run(lab, 'GPT 6L', 2e-3, 1339)[3]] == [1, 2, 3, 4, 5, None]
    assert retrained == []


def test_a_depth_curriculum_sent_down_another_path_trains_under_its_own_names(lab, tmp_path, monkeypatch):
    # the records hold seed 1338's old path: stage 2 repeated once, then stages 3 ... 5 and the task at repeat
    # count 1, stage 2's first pass trained again elsewhere (eval/retrain.json). Trained anew here, stage 2 is learned
    # at once and stage 3 is repeated instead, so from stage 3's repeat on the new path meets the old one's names
    # with other starting weights: each such stage trains under a name of its own, the old records stay as they
    # are, and a second call finds the same folders
    import battery
    monkeypatch.chdir(tmp_path)
    bar = lambda n: math.log(7) / (2 * n)    # noqa: E731 (stage_learned's)
    base = [*lab_spec.PAPERS['depth']['runs']['GPT 6L'], *lab_spec.PAPERS['depth']['stage'], '--learning_rate=0.002',
            '--min_lr=0.0002']
    old = [(1, 0), (2, 0), (2, 1), (3, 1), (4, 1), (5, 1), (None, 1)]
    for (n, r), (m, q) in zip(old[1:], old):
        src = lab_depth.stage_dir(lab, 'GPT 6L', 2e-3, m, 1338, q)
        lab.records.keep(lab.record_of(lab_depth.stage_dir(lab, 'GPT 6L', 2e-3, n, 1338, r)), {
            'done': {'argv': ['train.py', *base, f'--init_from={src}']},
            'eval': {'test/battery.json': {}} if n is None else {'retrain.json': {}} if (n, r) == (2, 0) else {}})
    before = open(lab.records.path('depth')).read()
    trained = []

    def train(args, out, seed, iters=None):
        assert lab.held_otherwise(out, args) is None, out    # train.py would refuse it, or rewrite the record
        n = int(next(a for a in args if a.startswith('--dataset=hops'))[len('--dataset=hops'):] or 6)
        os.makedirs(os.path.join(out, 'eval'), exist_ok=True)
        json.dump({'argv': ['train.py', *args]}, open(os.path.join(out, 'done.json'), 'w'))
        loss = bar(n) + 1e-3 if n in (2, 3) and not out.endswith('_b-s1338') else bar(n) - 1e-3
        with open(os.path.join(out, 'log.jsonl'), 'w') as f:
            f.write(json.dumps({'kind': 'eval', 'iter': 1000, 'val_loss': loss}) + '\n')
        trained.append(out)
        return 60.0
    monkeypatch.setattr(lab, 'train', train)
    monkeypatch.setattr(lab, 'evaluate', lambda out, *a: {'loss': 0.1})
    monkeypatch.setattr(lab, 'eval_json', lambda out, file, *a, sub=None: {
        'tasks': {t: {'generate': 1.0} for t in battery.HOP_TASKS}})
    *_, stages = lab_depth.depth_run(lab, 'GPT 6L', 2e-3, 1338)
    new = [(1, 0, ''), (2, 0, 'b'), (3, 0, ''), (3, 1, 'b'), (4, 1, 'b'), (5, 1, 'b'), (None, 1, 'b')]
    assert [d for _, d in stages] == [lab_depth.stage_dir(lab, 'GPT 6L', 2e-3, n, 1338, r, alt) for n, r, alt in new]
    assert open(lab.records.path('depth')).read() == before
    trained[:] = []
    assert lab_depth.depth_run(lab, 'GPT 6L', 2e-3, 1338)[3] == stages
    assert sorted(set(trained)) == sorted(d for _, d in stages)    # the same folders: nothing went elsewhere


@pytest.mark.parametrize('deep_wins', [True, False])
def test_depth_gate_brackets_each_rate_and_reads_every_hop(lab, tmp_path, monkeypatch, deep_wins):
    # made-up runs (nothing trains): each GPT's answer loss is lowest at its own rate, one of them beyond
    # the first grid; the 6L answers every hop count right (within seed noise), the 3L those of two lookups at
    # most (k = 1, 2 and k = 6, two back around the cycle), which the gate leaves out. Each
    # stage's last answer loss: the 3L never learns a stage's newest hop past the first; the 6L learns each
    # at once, but seed 1338's stage 2, which it learns when repeated. TextNCA never reads the listing (ln 26 on
    # one hop, a guess over every letter); its control learns as the other looped models do, and trains no seeds:
    # the pair is not decidable whatever they read. Parcae mu=1's seed 1338 stays at ln 26 on its one-hop stages: a
    # seed other than the bracket's goes on, its table needing the task read
    import battery
    monkeypatch.chdir(tmp_path)
    best = {'GPT 3L': 2e-3, 'GPT 6L': 5e-4}
    trained = []

    def stage_loss(out, seed, n):
        at_chance = math.log(7) / n    # hops 1 ... n - 1 exact, hop n at chance among 7
        if 'TextNCA_lr_' in out or ('mu_1' in out and seed == 1338 and n == 1):
            return math.log(26)
        if '3L' in out:
            return 0.001 if n == 1 else at_chance
        if seed == 1338 and n == 2 and '_2_hops_1-' not in out:
            return at_chance / 2 + 1e-3     # just short of learned: repeated
        return at_chance / 2 - 1e-3

    def train(args, out, seed, iters=None):
        made_up_run(args, out, 44)
        n = int(next(a for a in args if a.startswith('--dataset=hops'))[len('--dataset=hops'):] or 6)
        with open(os.path.join(out, 'log.jsonl'), 'w') as f:   # each stage's last answer loss
            f.write(json.dumps({'kind': 'eval', 'iter': 1000, 'val_loss': stage_loss(out, seed, n)}) + '\n')
        if 'GPT_6L' in out and seed == 1339 and n == 6:    # its checkpoint trained again, not reproducing its record
            os.makedirs(os.path.join(out, 'eval'), exist_ok=True)
            json.dump({'record': [[1000, 0.25]], 'retrained': [[1000, 0.5]]},
                      open(os.path.join(out, 'eval', 'retrain.json'), 'w'))
        trained.append((out, seed, args))
        return 60.0

    def lr_of(out):
        return float(re.match(r'\d+_\d+', out.split('_lr_')[1]).group().replace('_', '.'))

    def evaluate(out, *a):
        assert 'TextNCA_lr_' not in out    # nothing to read past the one-hop stages
        name = 'GPT 6L' if '6L' in out else 'GPT 3L'
        return {'loss': 1.0 + abs(math.log(lr_of(out) / best[name]))}

    def reading(out, file, *a, sub=None):
        assert 'TextNCA_lr_' not in out
        seed = int(out.rsplit('-s', 1)[1])
        # the reported seeds only, on the test split (the rate seed's loss chose the rate; nothing chose on test)
        assert seed != lab_spec.RATE_SEED and '--split=test' in a and (sub == 'test' or sub.startswith('test/'))
        sub = sub[len('test/'):]
        right = lambda k: 0.9 + 0.01 * (seed - 1337) if ('6L' in out and deep_wins) or battery.lookups(k) <= 2 else 0.15
        if sub:    # a looped model: better with test-time depth, its depth-1 control not
            knob, depth = re.fullmatch(r'([a-z_]+?)_?(\d+)', sub.lower()).groups()
            depth = int(depth)
            assert any(x.lower() == f'--{knob}={depth}' for x in a)
            right = lambda k: 0.15 + (0 if '_1_lr_' in out else 0.1 * min(depth, 6)) + 0.001 * (seed - 1337)
        return {'tasks': {t: {'generate': right(int(t[3:]))} for t in battery.HOP_TASKS}}
    monkeypatch.setattr(lab, 'train', train)
    monkeypatch.setattr(lab, 'ensure_ckpt', lambda out: None)    # each stage trained here: its checkpoint is there
    monkeypatch.setattr(lab, 'evaluate', evaluate)
    monkeypatch.setattr(lab, 'eval_json', reading)
    written = []    # the gate's table is written before any looped model trains, then each pair's as it is decided
    monkeypatch.setattr(lab_depth, 'write', lambda lab, paper, rows, fig, md, seeds: written.append(
        (paper, [r['run'] for r in rows], md, any('Parcae' in out for out, _, _ in trained))))
    if not deep_wins:    # a looped sweep an earlier protocol recorded: with the gate failed, not trained on, not read
        lab.records.keep('depth/Parcae_lr_0_001-s1337', {'done': {'seconds': 60.0}, 'eval': {}})
    rows, fig, md = lab_depth.depth(lab, 3)
    if deep_wins:
        gate = ['GPT 3L (lr 0.002)', 'GPT 6L (lr 0.0005)']
        assert [w[:2] for w in written] == [
            ('depth', gate), ('depth', gate + ['Parcae (lr 0.002)', 'Parcae mu=1 (lr 0.002)']),
            ('depth', gate + [f'{n} (lr 0.002)' for n in ('Parcae', 'Parcae mu=1', 'TextNCA residual',
                                                           'TextNCA residual Ts=1')]),
            ('depth', gate + [f'{n} (lr 0.002)' for n in ('Parcae', 'Parcae mu=1', 'TextNCA residual',
                                                           'TextNCA residual Ts=1', 'workspace', 'workspace R=1')])]
        assert not written[0][3] and '**Gate: holds**' in written[0][2] and 'still training' in written[0][2]
        assert '| num_recur |' in written[1][2] and '| Ts |' not in written[1][2]
        assert ('TextNCA residual, TextNCA residual Ts=1, workspace, workspace R=1, TextNCA, TextNCA Ts=1: still '
                'training') in written[1][2]
        assert '| Ts |' in written[2][2] and '| rounds |' not in written[2][2]
        assert '| rounds |' in written[3][2] and 'TextNCA, TextNCA Ts=1: still training' in written[3][2]
        assert 'still training' not in md
    else:
        assert written == []    # main() writes the only table
    assert [r['run'] for r in rows][:2] == ['GPT 3L (lr 0.002)', 'GPT 6L (lr 0.0005)']
    looped = lab_spec.PAPERS['depth']['looped']
    if deep_wins:    # the looped models and their controls train only once the gate holds, each at its own rate
        assert [r['run'] for r in rows][2:] == [f'{n} (lr 0.002)' for n in looped if n not in ('TextNCA', 'TextNCA Ts=1')]
        # TextNCA: three passes of one hop at each rate of the grid, seed 1337 only, then no wider grid, no seeds
        more = lab_spec.STAGE_REPEATS
        assert sorted(out for out, _, _ in trained if 'TextNCA_lr_' in out) == sorted(
            lab_depth.stage_dir(lab, 'TextNCA', lr, 1, 1337, r) for lr in lab_spec.DEPTH_LRS for r in range(1 + more))
        assert (f"**TextNCA against TextNCA Ts=1: not decidable on this task.** TextNCA ended its one-hop stages "
                f"(seed 1337, {1 + more} passes) at 3.258 at 0.001, 3.258 at 0.002, 3.258 at 0.004: no better than "
                f"a uniform guess among the listed letters (1.946)") in md
        grid = ', '.join(f'{lr:g} {1 + abs(math.log(lr / 2e-3)):.3f}' for lr in lab_spec.DEPTH_LRS)
        assert (f"; TextNCA Ts=1 read the listing (seed 1337's answer loss {grid}; its rate 0.002), but TextNCA at no "
                "rate, so TextNCA Ts=1's reported seeds were not trained: they decide nothing alone.") in md
        assert {seed for out, seed, _ in trained if 'TextNCA_Ts_1_' in out} == {1337}
        assert '| Ts | TextNCA (lr' not in md and '| Ts | TextNCA residual (lr 0.002) |' in md
        s1338 = [out for out, seed, _ in trained if 'Parcae_mu_1_lr_0_002' in out and seed == 1338]
        assert s1338[:4] == [lab_depth.stage_dir(lab, 'Parcae mu=1', 2e-3, n, 1338, r) for n, r in ((1, 0), (1, 1), (1, 2),
                                                                                             (2, 2))]
        assert re.fullmatch(r'out-results/depth/Parcae_mu_1_lr_0_002_\d+-s1338', s1338[-1])    # the task itself
        assert {lr_of(out) for out, seed, _ in trained if 'mu_1' in out} == set(lab_spec.DEPTH_LRS)
        assert '| num_recur | Parcae (lr 0.002) | Parcae mu=1 (lr 0.002) |' in md
        assert ('**Parcae against Parcae mu=1** (3 seeds a side, exact match at three lookups or more): holds at '
                'num_recur 1, 2, 3, 4, 6, 8.') in md
        assert '| 6 | 0.752 +- 0.001 | 0.152 +- 0.001 | +0.600 | holds |' in untested(md)
        first = {r['run'].split(' (lr')[0]: r['dirs'][0] for r in rows[2:]}
        # seed 1338's stages of 3,000 it. of 64 x 64: 5, stage 2 again and the task; Parcae mu=1's one-hop stage
        # twice again and its stage 2 to the cap (10)
        tokens = {name: (10 if name == 'Parcae mu=1' else 7) * 64 * 64 * 3000 for name in first}
        for model, control in list(lab_spec.PAPERS['depth']['controls'].items())[:3]:
            line = next(x for x in md.splitlines() if x.startswith('Parameters') and f': {model} ' in x)
            (p, e, f), (pc, ec, fc) = tables.counts(first[model]), tables.counts(first[control])
            assert f": {model} {p:,} / {e:,}, {f / 1e6:.2f}M, {tokens[model] / e:.0f}; {control} {pc:,} / {ec:,}, " \
                   f"{fc / 1e6:.2f}M, {tokens[control] / ec:.0f}." in line
            assert fc < f and abs(ec - e) <= e // 100    # the same model, run once
        assert untested(md).count('| 1 | 0.252 +- 0.001 | 0.152 +- 0.001 | +0.100 | holds |') == 3
        assert len([a for a in fig.axes if a.has_data()]) == 3
    else:
        assert len(rows) == 2 and "The gate does not hold, so the looped models' depth sweeps" in md
        assert not any(m in out for out, _, _ in trained for m in ('Parcae', 'workspace', 'TextNCA'))
        assert len(fig.axes) == 2    # no empty slot for the looped models' curves
    trained = [t for t in trained if any(m in t[0] for m in ('GPT_3L', 'GPT_6L'))]
    rows = rows[:2]
    assert all(r['seeds'] == [1338, 1339, 1340] and r['mean'] == 1.0 for r in rows)    # the rate seed's apart
    # each run's stages in order, each from the one before: hop counts up to 1, 2, ..., 5, then the task; a stage
    # whose newest hop is not learned again from its own end, at most STAGE_REPEATS times; the names count the repeats
    runs = {}
    for out, seed, args in trained:
        runs.setdefault((lr_of(out), '6L' in out, seed), []).append((out, args))
    more = lab_spec.STAGE_REPEATS
    for (lr, deep, seed), stages in runs.items():
        hops = [int(next(a for a in args if a.startswith('--dataset=hops'))[len('--dataset=hops'):] or 6)
                for _, args in stages]
        if not deep:    # stage 1 learned, every later one repeated to the cap
            assert hops == [1] + [n for n in range(2, 6) for _ in range(1 + more)] + [6]
        elif seed == 1338:    # stage 2 learned on its first repeat
            assert hops == [1, 2, 2, 3, 4, 5, 6]
        else:
            assert hops == [1, 2, 3, 4, 5, 6]
        r = [sum(a == b for a, b in zip(hops[:i], hops[1:i + 1])) for i in range(len(hops))]
        name = f"GPT {'6L' if deep else '3L'}"
        assert [out for out, _ in stages] == [lab_depth.stage_dir(lab, name, lr, n if n < 6 else None, seed, k)
                                              for n, k in zip(hops, r)]
        assert not any(a.startswith('--init_from=') for a in stages[0][1])
        for (before, _), (out, args) in zip(stages, stages[1:]):
            assert args[-1] == f'--init_from={before}'
        for (out, args), n in zip(stages, hops):
            assert lab_spec.CFG + 'depth/stage.py' in args     # every stage, the task too, as long as the first
            assert f'--dataset=hops{n if n <= len(battery.UP_TO) else ""}' in args
    assert lab_depth.stage_dir(lab, 'GPT 6L', 5e-4, 2, 1338, 1).endswith('GPT_6L_lr_0_0005_up_to_2_hops_1-s1338')
    assert len(runs) == 5 + 3 + 3 + 3    # grids on the rate seed, then the reported seeds at each best rate
    assert (f"N = 1 {math.log(7) / 2 - 1e-3:.3f}, N = 2 {math.log(7) / 4 + 1e-3:.3f} then "
            f"{math.log(7) / 4 - 1e-3:.3f}, N = 3") in md    # the first reported seed's, 1338: stage 2 repeated
    assert f'Stages repeated, per seed: GPT 3L {4 * more}, {4 * more}, {4 * more}; GPT 6L 1, 0, 0.' in md
    d, vocab = 64, 44
    block = 12 * d * d + 13 * d    # attention 4 d^2, MLP 8 d^2; biases and LayerNorms 13 d
    size = {n: (n * block + 2 * d + 2 * vocab * d, n * block + 2 * d) for n in (3, 6)}    # the tied matrix twice
    assert (f"Parameters (paper convention / non-embedding) and FLOPs per token: GPT 3L {size[3][0]:,} / "
            f"{size[3][1]:,}, " in md and f"; GPT 6L {size[6][0]:,} / {size[6][1]:,}, " in md)
    table = [line for line in untested(md).split('**Gate')[0].splitlines() if line.startswith('| ') and line[2].isdigit()]
    assert len(table) == len(battery.HOPS)
    if deep_wins:
        assert table[2].startswith('| 3 | 3 | 0.143 | 0.150 +- 0.000 | 0.920 +- 0.010 | +0.770 | holds |')
        assert table[5] == '| 6 | 2 | 0.143 | 0.920 +- 0.010 | 0.920 +- 0.010 | +0.000 | tie |'    # two lookups back
        assert ("**Gate: holds** (GPT 6L ahead, the verdict 'holds': by more than two sd, Welch p < 0.05 and the "
                'bootstrap interval above 0, at 3 of the 3 hop counts that need three lookups '
                'or more)') in md
    else:
        assert table[2].endswith('| +0.000 | tie |') and '**Gate: does not hold**' in md
    assert ("ended elsewhere than the record (another CPU's or build's rounding; its curve and the readings its "
            "record holds are the record's, the readings taken since these weights'): GPT 6L seed 1339 (answer loss "
            "0.5000 against the record's 0.2500).") in md
    if not deep_wins:
        return
    # a looped run that fails stops the others at once (not after their hours of training), and says why
    real, waited = lab_depth.depth_tune, []

    def tune(lab, name, *a):
        if name in lab_spec.PAPERS['depth']['runs']:
            return real(lab, name, *a)
        if name == 'Parcae':
            raise subprocess.CalledProcessError(2, ['train.py'])
        waited.append(lab.stopping.wait(timeout=60))    # the others train on until stopped
        raise KeyboardInterrupt
    monkeypatch.setattr(lab_depth, 'depth_tune', tune)
    with pytest.raises(subprocess.CalledProcessError):
        lab_depth.depth(lab, 3)
    assert waited == [True] * (len(lab_spec.PAPERS['depth']['looped']) - 1)
    # the last one fails (run_jobs stops the rest): the failure is reported, not the stop it caused in the first
    last, waited = list(lab_spec.PAPERS['depth']['looped'])[-1], []

    def tune_last(lab, name, *a):
        if name in lab_spec.PAPERS['depth']['runs']:
            return real(lab, name, *a)
        if name == last:
            lab.stop()
            raise subprocess.CalledProcessError(2, ['train.py'])
        waited.append(lab.stopping.wait(timeout=60))
        raise KeyboardInterrupt
    monkeypatch.setattr(lab_depth, 'depth_tune', tune_last)
    lab.stopping.clear()
    with pytest.raises(subprocess.CalledProcessError):
        lab_depth.depth(lab, 3)
    assert waited == [True] * (len(lab_spec.PAPERS['depth']['looped']) - 1)
    # no looped model reads the listing at any rate: each pair says so, and the gate's rows stand alone
    monkeypatch.setattr(lab_depth, 'depth_tune', lambda lab, name, *a: real(lab, name, *a) if name in
                        lab_spec.PAPERS['depth']['runs'] else ({lr: math.log(26) for lr in lab_spec.DEPTH_LRS}, None))
    lab.stopping.clear()
    rows, fig, md = lab_depth.depth(lab, 3)
    assert len(rows) == 2 and md.count('not decidable on this task') == len(lab_spec.PAPERS['depth']['controls'])
    # nor does the GPT 3L: the gate is not decidable (it had raised a KeyError), and no looped model trains
    shallow = list(lab_spec.PAPERS['depth']['runs'])[0]
    monkeypatch.setattr(lab_depth, 'depth_tune', lambda lab, name, *a: real(lab, name, *a) if name in
                        lab_spec.PAPERS['depth']['runs'] and name != shallow else
                        ({lr: math.log(26) for lr in lab_spec.DEPTH_LRS}, None))
    rows, fig, md = lab_depth.depth(lab, 3)
    assert rows == [] and md.startswith(f"**Gate: not decidable on this task.** {shallow} ended its one-hop stages")
    assert "the looped models' depth sweeps (" in md and 'GPT 6L ended' not in md


def test_each_headline_run_trains_at_its_own_best_rate_and_its_ablations_at_its_model_s(lab, tmp_path, monkeypatch):
    # made-up runs (nothing trains): the loss is lowest at each model's own rate, the TextNCA's beyond the first
    # grid; the ablation follows its model's rate, the untuned run keeps its config's. A seed that stalls at the
    # first seed's best rate moves the NCA to its runner-up, where every seed trains too
    monkeypatch.chdir(tmp_path)
    best = {'nca': 8e-3, 'gpt': 1e-3}
    trained = []

    def train(args, out, seed, iters=None):
        os.makedirs(out, exist_ok=True)
        lr = next((float(a.split('=')[1]) for a in args if a.startswith('--learning_rate=')), 2e-3)
        json.dump({'model': args[0], 'learning_rate': lr}, open(os.path.join(out, 'config.json'), 'w'))
        trained.append((out, seed, args))
        return 60.0

    def evaluate(out, *a):
        cfg = json.load(open(os.path.join(out, 'config.json')))
        stall = 2.5 if cfg['model'] == 'nca' and cfg['learning_rate'] == 8e-3 and out.endswith('-s1338') else 0.0
        return {'loss': 1.0 + abs(math.log(cfg['learning_rate'] / best[cfg['model']])) + stall}
    monkeypatch.setattr(lab, 'train', train)
    monkeypatch.setattr(lab, 'evaluate', evaluate)
    monkeypatch.setattr(tune, 'val_curve', lambda out: [])
    spec = {'runs': {'NCA': ['nca'], 'NCA reversed': ['nca', '--windows=(32, 8, 2)'], 'GPT': ['gpt'], 'Eq. 1': ['nca']},
            'tune': {'NCA': 2e-3, 'GPT': 2e-3}, 'tune_as': {'NCA reversed': 'NCA'}}
    rows, _ = tune.report_runs(lab, 'x', spec, 3)
    by = {r['run']: r for r in rows}
    assert by['NCA']['lr'] == by['NCA reversed']['lr'] == 4e-3 and by['GPT']['lr'] == 1e-3 and 'lr' not in by['Eq. 1']
    assert list(by['NCA']['grid']) == ['0.001', '0.002', '0.004', '0.008', '0.016'] and list(by['GPT']['grid']) == \
        ['0.0005', '0.001', '0.002', '0.004']
    assert by['NCA']['finals'] == {'0.008': pytest.approx(1 + 2.5 / 3), '0.004': pytest.approx(1 + math.log(2))}
    assert by['GPT']['finals'] == {'0.001': 1.0, '0.0005': pytest.approx(1 + math.log(2))}   # a tie goes to the lower
    assert by['GPT']['mean'] == 1.0 and by['NCA']['mean'] == pytest.approx(1 + math.log(2))
    assert all(r['seeds'] == [1337, 1338, 1339] for r in rows)
    # a rate other than the config's trains in its own folder, with the floor a tenth of it; the config's in the plain one
    runs = {(o, s): a for o, s, a in trained}
    assert runs[('out-results/x/NCA_reversed_lr_0_004-s1339', 1339)][-2:] == ['--learning_rate=0.004', '--min_lr=0.0004']
    assert ('out-results/x/GPT-s1337', 1337) in runs and ('out-results/x/GPT-s1338', 1338) not in runs
    assert len(trained) == 5 + 4 + 4 + 4 + 3 + 3 == len(runs)     # grids, the best two's seeds, seeds; none twice
    line = tables.rates_md(rows)[0]
    assert 'NCA: 0.001 3.079, 0.002 2.386, 0.004 1.693, 0.008 1.000, 0.016 1.693; mean 0.008 1.833, 0.004 1.693 ' \
           '-> 0.004' in line
    assert line.endswith('At their model\'s rate: NCA reversed 0.004.')
    # each seed again at the rate its other two choose: 1338's others do best at 8e-3, where 1338 stalls; its
    # ablation was not trained there, and the GPT's seeds all agree on its rate
    assert by['NCA']['off_seed'] == {'lrs': ['0.004', '0.008', '0.004'],
                                     'losses': [pytest.approx(1 + math.log(2)), 3.5, pytest.approx(1 + math.log(2))]}
    assert by['NCA reversed']['off_seed'] == {'lrs': ['0.004', '0.008', '0.004'], 'losses': None}
    assert by['GPT']['off_seed'] == {'lrs': ['0.001'] * 3, 'losses': [1.0] * 3} and 'off_seed' not in by['Eq. 1']
    assert 'Each seed at the rate its other seeds choose (their mean over the two): NCA 0.004, 0.008, 0.004 ' \
           '(mean 2.295); every other run at its rate.' in line
    # the GPT ahead of the NCA by 0.69 with no spread holds; with 1338's stall the gap is inside two sd
    assert tables.verdict_cell(by['GPT'], by['NCA']).startswith(
        "holds; with each seed's rate chosen on the other seeds: not shown: bootstrap interval passes, inside two sd")
    assert tables.verdict_cell(by['GPT'], by['NCA reversed']) == \
        "holds; with each seed's rate chosen on the other seeds: not trained"
    assert tables.verdict_cell(by['GPT'], by['Eq. 1']) == stats.verdict(by['GPT'], by['Eq. 1'])


def test_the_headline_gap_at_two_sizes_against_tokens_per_parameter(lab, monkeypatch):
    # made-up rows: the model trails its control by 0.10 at 1.5 tokens per parameter and leads by 0.05 at 25
    # the model (nca) has 4/5 of its control's non-embedding parameters and twice its FLOPs per token
    monkeypatch.setattr(tables, 'counts', lambda out: (0, (80_000 if 'small' in out else 400_000) if 'nca' in out else
                                                        (100_000 if 'small' in out else 500_000),
                                                        2e6 if 'nca' in out else 1e6))
    monkeypatch.setattr(tables, 'tokens_seen', lambda out: 2_500_000 if 'small' in out else 750_000)

    def row(run, *ls):
        return {'run': run, 'seeds': [1337, 1338, 1339], 'losses': ls, 'mean': stats.mean_sd(ls)[0],
                'sd': stats.mean_sd(ls)[1]}
    big = [row('nca', 2.10, 2.11, 2.12), row('TF d96', 2.00, 2.01, 2.02)]
    small = [row('nca', 2.30, 2.31, 2.32), row('TF', 2.35, 2.36, 2.37)]
    fig, ax = tables.plt.subplots()
    md = tables.sizes(lab, 'x', 'nca', [('TF d96', 'TF')], [('x', big), ('x-small', small)], ax)
    assert untested(md[2:]) == ['| TF d96 | 400,000 / 500,000 | 2.00M / 1.00M | 1.9 / 1.5 | +0.100 +- 0.020 | run lower |',
                      '| TF | 80,000 / 100,000 | 2.00M / 1.00M | 31.2 / 25.0 | -0.050 +- 0.020 | holds |', '',
                      'Every gap is shown at one size at least.']
    xs, ys = ax.lines[0].get_data()     # against the model's own tokens per parameter
    assert list(xs) == [1.875, 31.25] and [round(y, 3) for y in ys] == [0.1, -0.05]
    tables.plt.close(fig)


def test_a_gap_inside_the_noise_at_both_sizes_is_not_decidable():
    def row(run, *ls):
        return {'run': run, 'losses': ls, 'mean': stats.mean_sd(ls)[0], 'sd': stats.mean_sd(ls)[1]}
    big = [row('ws', 2.0, 2.01, 2.02), row('tie twice', 2.01, 2.02, 2.03), row('tie, then behind', 2.0, 2.01, 2.02)]
    small = [row('ws', 1.5, 1.51, 1.52), row('tie twice', 1.5, 1.51, 1.52), row('tie, then behind', 1.6, 1.61, 1.62)]
    both = [('x', big), ('x-small', small)]
    assert tables.undecided_md('ws', [('tie twice', 'tie twice'), ('tie, then behind', 'tie, then behind')], both) == \
        ['Not decidable at this scale (no gap shown at either size): ws against tie twice.']
    assert tables.undecided_md('ws', [('tie, then behind', 'tie, then behind')], both) == \
        ['Every gap is shown at one size at least.']


@pytest.mark.parametrize('paper', ['textnca', 'fon', 'parcae', 'workspace'])
def test_the_second_size_sees_at_least_20_tokens_per_parameter(paper):
    spec = lab_spec.PAPERS[paper]['small']
    assert set(spec['tune']) == set(spec['runs'])
    for name, args in spec['runs'].items():
        cfg = resolve_config(args + [f"--vocab_size={257 if paper == 'workspace' else 65}"])
        with torch.device('meta'):
            m = models.build_model(cfg['model'], cfg)
        non_emb = m.num_params() - sum(e.weight.numel() for e in m.modules() if isinstance(e, torch.nn.Embedding))
        tokens = cfg['batch_size'] * cfg['block_size'] * cfg['gradient_accumulation_steps'] * cfg['max_iters']
        # the cosine decays over lr_decay_iters (None: max_iters), the trapezoid over max_iters
        assert 20 <= tokens / non_emb < 30 and (cfg['lr_decay_iters'] or cfg['max_iters']) == cfg['max_iters'], \
            (name, tokens / non_emb)
        assert cfg['out_dir'].startswith(f'out-results/{paper}/')


def test_a_killed_run_resumes_from_its_own_checkpoint_without_its_start_s(lab, tmp_path, monkeypatch):
    # a later stage killed part way, in a clone whose out-results/ holds that stage's checkpoint and only the record
    # of the stage it started from: it resumes, and the stage before (whose weights it no longer reads) is not trained
    monkeypatch.chdir(tmp_path)
    calls = []
    monkeypatch.setattr(lab, 'run_with_progress', fake_train_py(calls, lambda: 1.5))
    pre, ft = lab.run_dir('p', 'pre', 1), lab.run_dir('p', 'ft', 1)
    lab.train(['c.py'], pre, 1)
    os.rename('out-results', 'old')
    os.makedirs(ft)
    open(os.path.join(ft, 'ckpt.pt'), 'w').close()                # the killed stage: a checkpoint, no done.json
    lab.train(['ft.py', f'--init_from={pre}'], ft, 1)
    assert len(calls) == 2 and calls[1][-1] == '--init_from=resume' and not os.path.exists(os.path.join(pre, 'ckpt.pt'))


def test_a_killed_and_resumed_run_counts_its_time_up_to_its_last_checkpoint(lab, tmp_path, monkeypatch):
    # a run killed 600 s after it started, its last checkpoint written at 500 s, then resumed: its wall
    # time is the 500 s that made the checkpoint plus the resume's own, not the resume's alone
    out = str(tmp_path / 'run')
    calls = []
    monkeypatch.setattr(lab, 'run_with_progress', lambda cmd, name: calls.append(cmd))
    now = [1000.0]
    monkeypatch.setattr(runner.time, 'time', lambda: now[0])
    lab.train(['cfg.py'], out, 1337)         # the first start: killed, no done.json
    os.remove(os.path.join(out, 'done.json'))
    open(os.path.join(out, 'ckpt.pt'), 'w').close()
    os.utime(os.path.join(out, 'ckpt.pt'), (1500.0, 1500.0))
    now[0] = 1600.0
    calls.clear()
    assert lab.train(['cfg.py'], out, 1337) == 500.0 and calls[0][-1] == '--init_from=resume'
    assert lab.train(['cfg.py'], out, 1337) == 500.0 and not calls[1:]     # finished: kept


def test_a_tuned_run_s_stated_rate_is_its_config_s_and_its_floor_a_tenth():
    # the config's own rate trains in the run's plain folder, so the stated rate must be the config's; every rate of
    # the bracket then decays to a tenth of itself, as the config's does
    specs = [s for p in lab_spec.PAPERS.values() for s in (p, p.get('small', {})) if 'tune' in s]
    assert len(specs) == 7
    for spec in specs:
        for name, lr in spec['tune'].items():     # a recipe that cools to 0 (Parcae's Table 21) says so: floor 0
            cfg = resolve_config(spec['runs'][name])
            assert cfg['learning_rate'] == lr and cfg['min_lr'] == pytest.approx(lr * spec.get('floor', 0.1)), name
        assert set(spec.get('tune_as', {}).values()) <= set(spec['tune'])


def test_textnca_report_reads_every_run_where_it_trained(lab, tmp_path, monkeypatch):
    # made-up runs (nothing trains): TextNCA is best at twice its config's rate, so its ablations and Ts sweep train
    # in rated folders, the GPTs at their config's; the report must read each row from its own folder
    monkeypatch.chdir(tmp_path)

    def train(args, out, seed, iters=None):
        made_up_run(args, out, 65, seed)
        return 60.0

    def evaluate(out, *a):
        if a and a[0].startswith('--sweep='):
            return {'values': [1, 2, 3, 4, 6], 'loss': [3.3, 2.5, 2.2, 2.0, 2.4]}
        cfg = json.load(open(os.path.join(out, 'config.json')))
        own = 4e-3 if cfg['model'] == 'textnca' else 2e-3
        return {'loss': 2.0 + abs(math.log(cfg['learning_rate'] / own)) + 0.001 * (cfg['seed'] - 1337)}
    monkeypatch.setattr(lab, 'train', train)
    monkeypatch.setattr(lab, 'evaluate', evaluate)
    monkeypatch.setattr(tune, 'val_curve', lambda out: [(0, 4.0), (500, 2.5), (1000, 2.0)])
    rows, fig, md = lab_textnca.textnca(lab, 3)
    by = {r['run']: r for r in rows}
    assert by['Ts=6']['dirs'] == [f'out-results/textnca/Ts_6_lr_0_004-s{s}' for s in (1337, 1338, 1339)]
    assert by['Transformer-6L d96']['dirs'][0] == 'out-results/textnca/Transformer_6L_d96-s1337'
    assert all(r['mean'] == pytest.approx(2.001) for r in rows if r['run'] not in ('Ts=8', 'staged, emb_scale 1 (Eq. 1 literally)'))
    assert "staged (2, 8, 32): 0.001 3.386, 0.002 2.693, 0.004 2.000, 0.008 2.693; mean 0.004 2.001, 0.002 2.694 " \
           "-> 0.004" in md
    assert "At their model's rate: reversed (32, 8, 2) 0.004" in md
    for k in (2, 6, 8):    # the Ts sweep again with the gate's init of the flagship's N: Ts alone changes
        cfg = json.load(open(os.path.join(by[f'Ts={k}, init N = 12']['dirs'][0], 'config.json')))
        flagship = json.load(open(os.path.join(by['staged (2, 8, 32)']['dirs'][0], 'config.json')))
        assert (cfg['Ts'], cfg['z_bias_steps']) == (k, len(flagship['windows']) * flagship['Ts'])
        assert {x: v for x, v in cfg.items() if x not in ('Ts', 'z_bias_steps', 'out_dir')} == \
               {x: v for x, v in flagship.items() if x not in ('Ts', 'z_bias_steps', 'out_dir')}
    assert "The same sweep with the update gate's chrono init fixed" in md and '| Ts=8, init N = 12 |' in md
    assert '| Transformer-6L | ' in md and '| +0.000 +- 0.002 | tie |' in untested(md)     # the second size's pair
    tables.plt.close(fig)


@pytest.mark.parametrize('paper', ['fon', 'workspace'])
def test_a_paper_s_report_runs_end_to_end_on_made_up_runs(lab, paper, tmp_path, monkeypatch):
    # nothing trains: every run's config is resolved as train.py would, its readings made up and deterministic;
    # the report must read each run where it trained (its own rate) and write every table and the figure
    monkeypatch.chdir(tmp_path)
    vocab = {'fon': 66, 'workspace': 257}[paper]
    legs = []

    def train(args, out, seed, iters=None, upto=None):
        legs.extend([(out, seed, upto, a[len('--init_from='):]) for a in args if a.startswith('--init_from=')])
        made_up_run(args, out, vocab, seed)
        return 60.0

    def score(out):   # each model best at its config's rate but the GPT 4L / Mamba2, best at half of it
        cfg = json.load(open(os.path.join(out, 'config.json')))
        own = 1e-3 if ('GPT_4L' in out or cfg['model'] == 'mamba2') else 2e-3
        return 1.5 + abs(math.log(cfg['learning_rate'] / own)) + 0.01 * (cfg['seed'] % 7)

    def eval_json(out, file, *args, leg=None):
        if file == 'infill.json':
            return {'holes': 1000, 'infill_acc': 0.3 + 0.0001 * leg, 'unholed_prefix_acc': 0.1,
                    'pretrained_prefix_acc': 0.5}     # every arm past its prior from 2,001 iterations on
        if file == 'extrapolate.json':
            return {'train_length': 128, 'rows': [{'length': n, 'loss': 1.5 + n / 1e4, 'delta_pct': n / 100}
                                                  for n in (128, 256, 512, 1024)]}
        raise ValueError(file)
    monkeypatch.setattr(lab, 'train', train)
    monkeypatch.setattr(lab, 'evaluate', lambda out, *a: {'loss': score(out), 'bits_per_byte': score(out)})
    monkeypatch.setattr(lab, 'eval_json', eval_json)
    monkeypatch.setattr(tune, 'val_curve', lambda out: [(0, 4.0), (500, 2.5), (1000, 2.0)])
    written = []    # FON's pretraining tables are written before any hole fine-tune starts (hours more)
    monkeypatch.setattr(lab_fon, 'write', lambda lab, p, r, f, md, s: written.append((md, list(legs))))
    rows, fig, md = cli.PAPER_FUNCTIONS[paper](lab, lab_spec.PAPERS[paper]['seeds'])
    by = {r['run']: r for r in rows}
    low = 'Mamba2' if paper == 'fon' else 'GPT 4L'
    if paper == 'fon':
        assert len(written) == 1 and written[0][1] == []
        head, _ = written[0][0].split('\n\nThe infill arms (Table 5) are still training')
        assert 'at a second size' in head and 'Length extrapolation' in head and 'Infill' not in head
        assert md.startswith(head) and 'Infill (Table 5 at CPU scale' in md and 'still training' not in md
        assert not fig.axes[2].texts
    else:
        assert written == []
    assert by[low]['lr'] == 1e-3 and by[low]['dirs'][0].endswith('lr_0_001-s' + str(by[low]['seeds'][0]))
    assert all(r['mean'] < 1.56 for r in rows if 'lr' in r)     # every tuned row read at its best rate
    assert f"{low}: 0.0005 " in md and '-> 0.001' in md
    if paper == 'fon':
        assert len(by['FON PC']['seeds']) == 3 and re.search(r'\| Mamba2 \| [\d,]+ / 222,064 \| [^|]+ \| [\d.]+ / 20\.8 \|', md)
        assert len([a for a in fig.axes if a.has_data()]) == 4
        # each infill arm fine-tunes every seed of its own pretraining (at its model's rate), leg by leg up to
        # the first leg of 2,000 or more past every prior
        assert by['FON AR/OD']['lr'] == by['FON PC']['lr'] and by['GPT learned']['lr'] == by['GPT RoPE']['lr']
        for name, (src, _) in lab_spec.PAPERS['fon']['finetune'].items():
            assert by[name]['seeds'] == by[src]['seeds'] == [1337, 1338, 1339], name
            for seed, pre in zip(by[src]['seeds'], by[src]['dirs']):
                assert [u for o, s, u, i in legs if o == lab.run_dir('fon', name, seed) and s == seed and
                        i == pre] == [250, 750, 1500, 2500], (name, seed)
        assert '| FON PC + holes | 3 | 1000/1000/1000 | 32.5 +- 0.0% |' in md and 'fill at 4000' not in md
        assert 'The legs stopped at 2500 iterations' in md
    if paper == 'workspace':   # the second size, read where it trained: the GPT 4L at its own rate there too
        assert os.path.isdir('out-results/workspace-small/GPT_4L_lr_0_001-s11')
        assert 'the workspace 152,229 parameters' in md and '2,764,800 bytes' in md
        assert '| GPT 4L | 746,187 / 783,064 | 18.12M / 5.44M | 1.4 / 1.3 | +0.000 +- 0.023 | tie |' in untested(md)
        assert '| GPT 4L | 119,889 / 133,668 | 2.96M / 1.08M | 23.1 / 20.7 |' in md
        assert md.split('| workspace against |')[1].count('| tie |') == 10     # five controls at two sizes
        assert 'Not decidable at this scale (no gap shown at either size): workspace against GPT 4L, fixed shared loop, ' in md
        assert len([a for a in fig.axes if a.has_data()]) == 3
    tables.plt.close(fig)


def test_parcae_and_its_gpt_each_train_at_their_own_rate(lab, tmp_path, monkeypatch):
    # made-up runs (nothing trains, no L(T) fit): the GPT 6L is best at 8e-3, Parcae beyond the first grid at
    # 3.2e-2; the GPT 12L trains at the 6L's rate and Parcae mu=1 at Parcae's, in both settings
    import battery
    monkeypatch.chdir(tmp_path)
    trained = []

    def train(args, out, seed, iters=None):
        trained.append((out, seed))
        made_up_run(args, out, 65)
        json.dump({'seconds': 60.0}, open(os.path.join(out, 'done.json'), 'w'))
        return 60.0

    def evaluate(out, *a):
        if a and a[0].startswith('--sweep='):
            return {'values': list(range(1, 13)), 'loss': [1.6 + 0.5 * math.exp(-0.6 * t) for t in range(1, 13)]}
        cfg = json.load(open(os.path.join(out, 'config.json')))
        own = 3.2e-2 if cfg['model'] == 'parcae' else 8e-3
        return {'loss': 1.5 + abs(math.log(cfg['learning_rate'] / own))}

    def eval_json(out, file, *a):
        return {'tasks': {t: {'n': 10, 'generate': 0.5, 'chance': battery.CHANCE[t], 'future': t in battery.FUTURE}
                          for t in battery.TASKS}}
    monkeypatch.setattr(lab, 'train', train)
    monkeypatch.setattr(lab, 'evaluate', evaluate)
    monkeypatch.setattr(lab, 'eval_json', eval_json)
    for module in (tune, lab_parcae):
        monkeypatch.setattr(module, 'val_curve', lambda out: [(0, 4.0), (100, 2.5), (200, 2.0)])
    monkeypatch.setattr(lab_parcae, 'stability', lambda out, warmup: dict.fromkeys(
        ('rise', 'rho_end', 'rho_max', 'sigma_end', 'sigma_max', 'norm_end', 'norm_max'), 0.5))
    monkeypatch.setattr(lab_parcae, 'fit_forms', lambda T, L, mu: {f: {'in': 0.1, 'extrapolation': 0.2} for f in stats.FORMS})
    rows, fig, md = lab_parcae.parcae(lab, 3)
    by = {r['run']: r for r in rows}
    for st in ('Shakespeare', 'battery'):
        for m, lr in (('GPT 6L', 8e-3), ('GPT 12L', 8e-3), ('Parcae', 3.2e-2), ('Parcae mu=1', 3.2e-2)):
            name = lab_spec.muon_run(m, st, lr)[0]
            assert by[name]['seeds'] == [1337, 1338, 1339] and by[name]['mean'] == 1.5, name
    assert "for the Parcae on tiny Shakespeare (seed 1337, whole val stream): 0.004: 3.579 | 0.008: 2.886 | " \
           "0.016: 2.193 | 0.032: 1.500 | 0.064: 2.193. Best 0.032, inside the grid; the mean over every seed at " \
           "the best two: 0.032: 1.500, 0.016: 2.193 -> 0.032." in md
    assert "Best 0.008, inside the grid; the mean over every seed at the best two: 0.008: 1.500, 0.004: 2.193 " \
           "-> 0.008." in md
    assert os.path.isfile('out-results/parcae/Parcae_Shakespeare_Muon_lr_0_016-s1339/config.json') and '(the GPTs at lr 0.008, Parcae at 0.032)' in md
    # the second size: each brackets its own rate again, in its own folder; the gap at both sizes
    assert "Parcae: 0.004 3.579, 0.008 2.886, 0.016 2.193, 0.032 1.500, 0.064 2.193; mean 0.032 1.500, " \
           "0.016 2.193 -> 0.032" in md
    assert "GPT 6L: 0.004 2.193, 0.008 1.500, 0.016 2.193; mean 0.008 1.500, 0.004 2.193 -> 0.008" in md
    assert os.path.isfile('out-results/parcae-small/Parcae_lr_0_032-s1339/config.json')
    assert '| GPT 6L | 1,214,848 / 1,215,488 | 12.04M / 7.92M | 0.4 / 0.4 | +0.000 +- 0.000 | tie |' in untested(md)
    assert '| GPT 6L | 171,648 / 171,504 | 1.92M / 1.27M | 20.1 / 20.2 |' in md
    assert len(fig.axes) == 10 and fig.axes[4].has_data() and fig.axes[9].has_data()
    assert 'Not decidable at this scale (no gap shown at either size): Parcae against GPT 6L.' in md
    tables.plt.close(fig)


def fake_train_py(calls, final_loss):
    """run_with_progress standing in for train.py: writes the config, a log ending at final_loss() and a checkpoint."""
    def run(cmd, out):
        calls.append(cmd)
        if '--overwrite=True' not in cmd and '--init_from=resume' not in cmd:
            assert not os.path.isfile(os.path.join(out, 'log.jsonl')), 'a new run into a used folder'
        json.dump({'model': 'gpt'}, open(os.path.join(out, 'config.json'), 'w'))
        with open(os.path.join(out, 'log.jsonl'), 'w') as f:
            f.write(json.dumps({'kind': 'eval', 'iter': 100, 'val_loss': final_loss()}) + '\n')
        open(os.path.join(out, 'ckpt.pt'), 'w').close()
    return run


@pytest.mark.parametrize('fresh', [False, True])
def test_a_run_s_record_rebuilds_it_in_a_fresh_clone(lab, fresh, tmp_path, monkeypatch, capsys):
    # a finished run leaves its record (no checkpoint); in a clone without out-results/ the same command reads the
    # run and its readings from the record, trains nothing and evaluates nothing; --fresh trains it again
    monkeypatch.chdir(tmp_path)
    calls, evals = [], []
    monkeypatch.setattr(lab, 'run_with_progress', fake_train_py(calls, lambda: 1.5))

    def fake_eval(cmd, **kw):
        evals.append(cmd)
        dest = next(a[len('--out='):] for a in cmd if a.startswith('--out='))
        os.makedirs(dest, exist_ok=True)
        json.dump({'loss': 1.49}, open(os.path.join(dest, 'stream_val.json'), 'w'))
    monkeypatch.setattr(runner.subprocess, 'run', fake_eval)
    out = lab.run_dir('p', 'a', 1)
    lab.train(['c.py', '--windows=(2, 8)'], out, 1)
    assert lab.evaluate(out, '--stream=True') == {'loss': 1.49}
    # one file for the paper, a line for the run trained and one for the reading it added
    assert [p.name for p in (tmp_path / 'results' / 'runs').rglob('*')] == ['p.jsonl']
    lines = [json.loads(line) for line in open(tmp_path / 'results' / 'runs' / 'p.jsonl')]
    assert [sorted(line) for line in lines] == [['config', 'done', 'eval', 'log', 'run'], ['eval', 'run']]
    assert lines[1] == {'run': 'p/a-s1', 'eval': {'stream_val.json': {'loss': 1.49}}}
    rec = lab.records.get('p/a-s1')
    assert rec['done']['argv'][:3] == ['train.py', 'c.py', '--windows=(2, 8)']   # an argument with spaces kept whole
    assert lab.evaluate(out, '--stream=True') and len(lines) == len(open(tmp_path / 'results' / 'runs' / 'p.jsonl').readlines())
    log = open(os.path.join(out, 'log.jsonl')).read()
    os.rename('out-results', 'old')                                                 # a fresh clone
    lab.opts.fresh = fresh
    seconds = lab.train(['c.py', '--windows=(2, 8)'], out, 1)
    assert lab.evaluate(out, '--stream=True') == {'loss': 1.49}
    assert (len(calls), len(evals)) == ((2, 2) if fresh else (1, 1))
    if not fresh:
        assert seconds == rec['done']['seconds'] and open(os.path.join(out, 'log.jsonl')).read() == log
        assert not os.path.exists(os.path.join(out, 'ckpt.pt'))
        # a reading recorded since (the records pulled, or appended from the lab's worktree): a --rebuild in
        # this clone reads it from the record, not the folder restored before it
        with open(tmp_path / 'results' / 'runs' / 'p.jsonl', 'a') as f:
            f.write(json.dumps({'run': 'p/a-s1', 'eval': {'stream_val.json': {'loss': 1.25},
                                                          'test/battery.json': {'tasks': {}}}}) + '\n')
        later = Lab(Options(rebuild=True))
        assert later.train(['c.py', '--windows=(2, 8)'], out, 1) == seconds
        assert later.evaluate(out, '--stream=True') == {'loss': 1.25}
        assert later.eval_json(out, 'battery.json', sub='test') == {'tasks': {}}
        # the run trained again elsewhere (another done): the folder is refused in one line, not appended over
        # the newer record nor rewritten; moved aside, the record is read
        with open(tmp_path / 'results' / 'runs' / 'p.jsonl', 'a') as f:
            f.write(json.dumps({**rec, 'run': 'p/a-s1', 'done': {**rec['done'], 'seconds': 99.0},
                                'eval': {'stream_val.json': {'loss': 1.125}}}) + '\n')
        latest, before = Lab(Options(rebuild=True)), open(os.path.join(out, 'done.json')).read()
        capsys.readouterr()
        with pytest.raises(SystemExit) as e:
            latest.train(['c.py', '--windows=(2, 8)'], out, 1)
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and 'holds another run than its record' in err[0], err
        assert open(os.path.join(out, 'done.json')).read() == before
        os.rename(out, out + '.old')
        assert latest.train(['c.py', '--windows=(2, 8)'], out, 1) == 99.0
        assert latest.evaluate(out, '--stream=True') == {'loss': 1.125}
        other = lab.run_dir('p', 'b', 1)                  # a record of other arguments is not reused
        lab.train(['c.py', '--n_layer=2'], other, 1)
        os.rename('out-results', 'old2')
        lab.train(['c.py', '--n_layer=3'], other, 1)
        assert len(calls) == 3 and '--n_layer=3' in calls[-1]


@pytest.mark.parametrize('same', [True, False])
def test_a_run_started_from_a_recorded_one_trains_that_one_again_first(lab, same, tmp_path, monkeypatch, capsys):
    # a fine-tune (or a later stage) needs its start's checkpoint, which a record does not hold: the start trains
    # again from its recorded arguments (not resumed, not refused as a used folder), and where it then ends
    # elsewhere than its record a line says so, a reading says so in the record, and the run's curve stays the
    # record's, which a repeat rule reads in the lab as in a --rebuild
    monkeypatch.chdir(tmp_path)
    calls, losses = [], iter([1.5, 1.5 if same else 1.6, 1.2])
    monkeypatch.setattr(lab, 'run_with_progress', fake_train_py(calls, lambda: next(losses)))
    pre, ft = lab.run_dir('p', 'pre', 1), lab.run_dir('p', 'ft', 1)
    lab.train(['c.py'], pre, 1)
    os.makedirs(os.path.join(pre, 'eval'))
    json.dump({'loss': 1.49}, open(os.path.join(pre, 'eval', 'stream_val.json'), 'w'))
    lab.keep(pre)
    os.rename('out-results', 'old')
    lab.train(['c.py'], pre, 1)               # read from the record
    lab.train(['ft.py', f'--init_from={pre}'], ft, 1)
    assert len(calls) == 3 and calls[1] == calls[0] + ['--overwrite=True'] and '--init_from=resume' not in calls[1]
    assert f'--init_from={pre}' in calls[2]
    assert ('trained again ends at' in capsys.readouterr().err) is not same
    rec = Lab(Options()).records.get('p/pre-s1')    # as a fresh clone reads the records
    assert rec['log'][-1]['val_loss'] == 1.5 and runner.val_curve(pre) == [(100, 1.5)]
    assert rec['eval'] == {'stream_val.json': {'loss': 1.49}, **({} if same else {
        'retrain.json': {'record': [[100, 1.5]], 'retrained': [[100, 1.6]]}})}
    lines = len(open(tmp_path / 'results' / 'runs' / 'p.jsonl').readlines())
    lab.train(['c.py'], pre, 1)
    # its checkpoint is newer than the readings the record wrote back, yet they are not read again: a retrain
    # that ended elsewhere must not replace the record's readings with its own weights'
    monkeypatch.setattr(runner.subprocess, 'run', lambda *a, **k: pytest.fail('read again'))
    assert lab.evaluate(pre, '--stream=True') == {'loss': 1.49}
    for f in ('ckpt.pt', os.path.join('eval', 'stream_val.json')):    # a copy of the folder dates both alike
        os.utime(os.path.join(pre, f), ns=(10 ** 18, 10 ** 18))
    assert lab.evaluate(pre, '--stream=True') == {'loss': 1.49}
    assert len(open(tmp_path / 'results' / 'runs' / 'p.jsonl').readlines()) == lines


def test_a_retrain_for_a_checkpoint_killed_midway_resumes_and_is_not_taken_for_the_whole(lab, tmp_path, monkeypatch,
                                                                                         capsys):
    # the retrain writes checkpoints as it goes: killed after one, that checkpoint is not the record's run; the
    # next call resumes it to its end, compares with the record's last eval, and only then is the checkpoint used
    monkeypatch.chdir(tmp_path)
    calls = []
    trained = fake_train_py(calls, lambda: 1.5)

    def killed(cmd, out):
        calls.append(cmd)
        open(os.path.join(out, 'ckpt.pt'), 'w').close()
        with open(os.path.join(out, 'log.jsonl'), 'w') as f:     # its log so far replaces the record's
            f.write(json.dumps({'kind': 'eval', 'iter': 50, 'val_loss': 2.0}) + '\n')
        raise KeyboardInterrupt
    pre = lab.run_dir('p', 'pre', 1)
    monkeypatch.setattr(lab, 'run_with_progress', trained)
    lab.train(['c.py'], pre, 1)
    os.rename('out-results', 'old')
    lab.train(['c.py'], pre, 1)                # read from the record
    monkeypatch.setattr(lab, 'run_with_progress', killed)
    with pytest.raises(KeyboardInterrupt):
        lab.ensure_ckpt(pre)
    assert calls[-1][-1] == '--overwrite=True'
    monkeypatch.setattr(lab, 'run_with_progress', trained)
    assert runner.val_curve(pre) == [(50, 2.0)]
    lab.train(['c.py'], pre, 1)                # a curriculum passing it: the retrain ends before its curve is read
    assert calls[-1] == calls[0] + ['--init_from=resume'] and runner.val_curve(pre) == [(100, 1.5)]
    assert 'trained again ends at' not in capsys.readouterr().err     # compared with the record's 1.5, not 2.0
    lab.ensure_ckpt(pre)
    assert len(calls) == 3 and not os.path.exists(os.path.join(pre, 'retraining.json'))


@pytest.mark.parametrize('paper', list(lab_spec.PAPERS))
def test_the_committed_tables_rebuild_from_the_records_byte_for_byte(paper, tmp_path, monkeypatch, capsys):
    # results/<paper>.md and .json are what the records give, to the byte, trained and read nothing (--rebuild);
    # a record changed, lost or left out fails here. Parcae's table predates the records: its rebuild stops at
    # the first run without one, in one line
    monkeypatch.chdir(tmp_path)
    lab = Lab(Options(rebuild=True, records=os.path.join(ROOT, 'results', 'runs'), results=str(tmp_path / 'results')))
    monkeypatch.setattr(lab, 'run_with_progress', lambda *a: pytest.fail('trained'))
    if not os.path.isfile(lab.records.path(paper)):
        assert paper == 'parcae'
        with pytest.raises(SystemExit) as e:
            cli.run(paper, lab_spec.PAPERS[paper]['seeds'], lab)
        err = capsys.readouterr().err
        assert e.value.code == 2 and len(err.splitlines()) == 1 and 'has no record of this run: --rebuild' in err
        return
    cli.run(paper, lab_spec.PAPERS[paper]['seeds'], lab)
    tables.plt.close('all')
    for ext in ('md', 'json'):
        assert (tmp_path / 'results' / f'{paper}.{ext}').read_bytes() == \
            open(os.path.join(ROOT, 'results', f'{paper}.{ext}'), 'rb').read(), ext
    from PIL import Image
    assert Image.open(tmp_path / 'results' / f'{paper}.png').size[0] > 0
