"""eval.py: it reproduces train.py's logged val loss, stream scoring covers every block once, the
L(T) fit recovers known parameters, and every analysis writes a JSON and a plot with the right
number of series. Tiny checkpoints are trained by train.py on a tiny synthetic battery."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import ROOT, train_script
import battery
from tools import eval as ev, eval_sweep
import prepare_data
import run_folder

COMMON = ['--max_iters=4', '--eval_interval=4', '--eval_iters=3', '--batch_size=4', '--block_size=32',
          '--n_embd=32', '--n_head=2', '--warmup_iters=1', '--log_interval=1', '--compile=False']
RUNS = {  # the GPT is hole fine-tuned (p_fill), so its vocabulary has the MASK row infill needs
    'gpt': ['--model=gpt', '--n_layer=1', '--p_fill=0.5'],
    'bigpt': ['--model=gpt', '--n_layer=1', '--p_fill=0.5', '--causal=False'],   # a BERT-style encoder
    'parcae': ['--model=parcae', '--n_prelude=1', '--n_recur_layers=1', '--n_coda=1', '--mean_recurrence=3'],
    'textnca': ['--model=textnca', '--windows=(4,8)', '--Ts=2', '--d_ff=64'],
}


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp('eval')
    data = str(root / 'data')
    prepare_data.prepare('synthetic', out_dir=data, n_train=1500, n_val=300, quiet=True)
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    procs = {k: subprocess.Popen([sys.executable, 'train.py', f'--data_dir={data}', f'--out_dir={root / k}', *COMMON, *a],
                                 cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for k, a in RUNS.items()}
    for k, p in procs.items():
        out = p.communicate(timeout=300)[0]
        assert p.returncode == 0, f'train.py {k} failed:\n{out[-3000:]}'
    return {k: str(root / k) for k in RUNS} | {'data': data}


def logged_val(out_dir):
    evals = [json.loads(l) for l in open(os.path.join(out_dir, 'log.jsonl')) if '"eval"' in l]
    return evals[-1]['val_loss']


@pytest.mark.parametrize('name', ['gpt', 'parcae'])
def test_reproduces_logged_val_loss(runs, name, tmp_path):
    res = ev.main([f'--out_dir={runs[name]}', f'--out={tmp_path}'])['score']
    assert res['loss'] == pytest.approx(logged_val(runs[name]), abs=1e-5)
    assert res['tokens'] == 3 * 4 * 32
    assert res['perplexity'] == pytest.approx(math.exp(res['loss']))
    # char tokenizer over ASCII: one byte per token, so bits per byte = bits per token
    assert res['bits_per_byte'] == pytest.approx(res['loss'] / math.log(2))
    saved = json.load(open(tmp_path / 'score_val.json'))
    assert saved['loss'] == pytest.approx(res['loss'])


def test_stream_batches_cover_each_block_once(tmp_path):
    L, n_tok = 9, 100                       # 11 complete blocks of 9 tokens, 1 token left over
    np.arange(n_tok, dtype=np.uint16).tofile(tmp_path / 'val.bin')
    batches = list(ev.stream_batches(str(tmp_path / 'val.bin'), L - 1, 4))
    assert [x.shape[0] for x, _ in batches] == [4, 4, 3]   # the last short batch is kept
    blocks = torch.cat([torch.cat([x[:, :1], y], 1) for x, y in batches])
    assert blocks.flatten().tolist() == list(range(11 * L))  # every token once, in order
    for x, y in batches:
        assert torch.equal(x[:, 1:], y[:, :-1])


def test_stream_scores_whole_val_stream(runs, tmp_path):
    res = ev.main([f'--out_dir={runs["gpt"]}', '--stream=True', f'--out={tmp_path}'])['score']
    val = np.memmap(os.path.join(runs['data'], 'synthetic', 'val.bin'), dtype=np.uint16, mode='r')
    nblocks = len(val) // 33
    assert res['tokens'] == nblocks * 32
    model, _ = run_folder.load_checkpoint(runs['gpt'])
    model.eval()
    xy = torch.from_numpy(val[:nblocks * 33].astype(np.int64)).view(nblocks, 33)
    with torch.no_grad():
        logits, _ = model(xy[:, :-1])
    want = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), xy[:, 1:].reshape(-1))
    assert res['loss'] == pytest.approx(want.item(), abs=1e-5)


def test_fit_recovers_known_parameters():
    T = np.arange(1, 25)
    f = eval_sweep.fit_exp_decay(T, 2.5 + 1.2 * np.exp(-0.4 * T))
    assert (f['L_inf'], f['Z'], f['z']) == pytest.approx((2.5, 1.2, 0.4), rel=1e-4)
    noisy = 3.1 + 0.8 * np.exp(-0.15 * T) + np.random.default_rng(0).normal(0, 1e-3, len(T))
    f = eval_sweep.fit_exp_decay(T, noisy)
    assert f['L_inf'] == pytest.approx(3.1, abs=0.02) and f['z'] == pytest.approx(0.15, rel=0.1)
    assert f['unidentified'] == ''


def test_a_fit_its_points_cannot_identify_says_so(capsys):
    # four points whose drop happens within the first step: any z past it fits with a larger Z
    f = eval_sweep.fit_exp_decay([1, 2, 4, 8], [3.0, 2.5, 2.49, 2.48])
    assert '4 points for 3 constants' in f['unidentified'] and 'shorter than the first step' in f['unidentified']
    T = np.arange(1, 25)   # a decay length of 100 over a range of 23: a line, its floor unseen
    assert 'longer than the swept range' in eval_sweep.fit_exp_decay(T, 2.0 + np.exp(-0.01 * T))['unidentified']


def test_parcae_sweep_json_plot_and_fit(runs, tmp_path, capsys):
    res = ev.main([f'--out_dir={runs["parcae"]}', '--sweep', 'num_recur=1..4', f'--out={tmp_path}'])['sweep']
    saved = json.load(open(tmp_path / 'sweep_num_recur.json'))
    assert saved['values'] == [1, 2, 3, 4] and len(saved['loss']) == 4
    assert set(saved['fit']) >= {'L_inf', 'Z', 'z'}
    out = capsys.readouterr().out
    assert 'L_inf' in out and 'cannot be identified from these points (4 points' in out
    assert saved['series'] == 2                      # measured points + fitted curve
    assert (tmp_path / 'sweep_num_recur.png').stat().st_size > 0
    # the sweep at the training depth is the default evaluation
    default = ev.main([f'--out_dir={runs["parcae"]}', f'--out={tmp_path}'])['score']
    assert res['loss'][2] == pytest.approx(default['loss'], abs=1e-6)
    assert res['loss'][0] != pytest.approx(res['loss'][3], abs=1e-7)   # the knob reaches the model


def test_extrapolation_reports_learned_positions_as_nan(runs, tmp_path):
    res = ev.main([f'--out_dir={runs["gpt"]}', '--extrapolate=16,32,64', f'--out={tmp_path}'])['extrapolate']
    saved = json.load(open(tmp_path / 'extrapolate.json'))
    rows = {r['length']: r for r in saved['rows']}
    assert rows[16]['loss'] is not None and rows[32]['loss'] is not None
    assert rows[64]['loss'] is None and 'learned positions' in rows[64]['note']   # past the position table
    assert rows[32]['delta_pct'] == pytest.approx(0.0)
    assert saved['series'] == 1 and (tmp_path / 'extrapolate.png').exists()


def test_infill_and_battery(runs, tmp_path):
    out = ev.main([f'--out_dir={runs["gpt"]}', '--infill=True', '--battery=True', '--battery_n=8', f'--out={tmp_path}',
                   f'--baseline_from={runs["gpt"]}'])
    inf = json.load(open(tmp_path / 'infill.json'))
    assert inf['holes'] > 0 and 0 <= inf['infill_acc'] <= 1
    assert 0 <= inf['unholed_prefix_acc'] <= 1 and 0 <= inf['pretrained_prefix_acc'] <= 1
    assert inf['pretrained'] == runs['gpt']
    assert inf['series'] == 1                        # one bar group: fill and the two no-hole readings
    bat = json.load(open(tmp_path / 'battery.json'))
    assert list(bat['tasks']) == list(battery.TASKS)
    assert bat['readings'] == ['fill', 'generate'] and bat['not_read'] == {}     # a causal GPT
    for t, r in bat['tasks'].items():
        assert r['chance'] == battery.CHANCE[t] and r['future'] == (t in battery.FUTURE)
        if t in ('mem_s4', 'mem_l') + battery.FAR:   # long range: no example fits block_size 32
            assert r['n'] == 0 and all(r[k] is None for k in bat['readings'])
        else:
            assert r['n'] > 0 and all(0 <= r[k] <= 1 for k in bat['readings'])
    assert bat['series'] == 3                        # two readings and the chance marks
    assert (tmp_path / 'battery.png').exists() and (tmp_path / 'infill.png').exists()
    assert out['infill']['holes'] == inf['holes']
    # the no-hole baseline needs a checkpoint the run was fine-tuned from: none here
    inf = ev.main([f'--out_dir={runs["gpt"]}', '--infill=True', f'--out={tmp_path}'])['infill']
    assert inf['pretrained_prefix_acc'] is None and 'not fine-tuned from' in inf['pretrained']


def test_battery_refuses_data_of_another_battery(runs, tmp_path, capsys):
    """eval.py rebuilds the val examples from meta.json's seed; data written by another battery
    (here: another seed under the same meta) is one line, not a silently wrong score."""
    import shutil
    shutil.copytree(os.path.join(runs['data'], 'synthetic'), tmp_path / 'synthetic')
    meta = json.load(open(tmp_path / 'synthetic' / 'meta.json'))
    json.dump({**meta, 'seed': meta['seed'] + 1}, open(tmp_path / 'synthetic' / 'meta.json', 'w'))
    with pytest.raises(SystemExit):
        ev.main([f'--out_dir={runs["gpt"]}', '--battery', f'--data_dir={tmp_path}', f'--out={tmp_path}'])
    # the checkpoint's record of its data (meta.json's hash) stops it first
    assert 'is not what the checkpoint trained on (meta.json differs)' in capsys.readouterr().err


def test_battery_compare_is_table_8s_layout(runs, tmp_path):
    """One table over runs: a Transformer's fill, causal, and a causal=False one's, bidirectional,
    every other model's fill (NaN without a MASK row: the Parcae run was never hole fine-tuned)."""
    res = ev.main(['--compare', runs['gpt'], runs['bigpt'], runs['parcae'], '--battery', '--battery_n=4',
                   f'--out={tmp_path}'])
    bat = json.load(open(tmp_path / 'battery.json'))
    assert [label for label, _ in bat['columns']] == ['gpt (gpt, causal)', 'bigpt (gpt, bidirectional)',
                                                      'parcae (parcae, fill)']
    assert bat['series'] == 4 and res['compare']['battery']['table'] == bat['table']
    lines = bat['table'].splitlines()
    assert len(lines) == 2 + len(battery.TASKS) + 3 and lines[-1].startswith('| future-dependent five far')
    assert lines[-2].startswith('| future-dependent five, mean')
    assert all(line.rstrip(' |').endswith('nan') for line in lines[2:])
    assert not lines[4].split('|')[3].strip() == 'nan'             # add: the GPT's causal fill


def test_a_causal_false_run_is_scored_and_filled_at_its_holes(runs, tmp_path, capsys):
    """A GPT trained with causal=False: its score is train.py's logged hole loss (holed eval set,
    full attention, the holes' targets only), the battery reads it in fill mode with full attention
    and gives it no generate reading, and --infill (a causal model's analysis) refuses it."""
    res = ev.main([f'--out_dir={runs["bigpt"]}', f'--out={tmp_path}'])['score']
    assert res['loss'] == pytest.approx(logged_val(runs['bigpt']), abs=1e-5)
    assert 0 < res['tokens'] < 3 * 4 * 32                 # the holes only
    stream = ev.main([f'--out_dir={runs["bigpt"]}', '--stream=True', f'--out={tmp_path}'])['score']
    marks = np.fromfile(os.path.join(runs['data'], 'synthetic', 'val_answers.bin'), dtype=np.uint8)
    # the answer spans of the val stream, and stride self-holing in a block that holds no answer
    assert 0 < stream['tokens'] <= int(marks.sum()) + len(marks) // 8
    bat = ev.main([f'--out_dir={runs["bigpt"]}', '--battery', '--battery_n=8', f'--out={tmp_path}'])['battery']
    assert bat['readings'] == ['fill_bidirectional'] and 'generate' in bat['not_read']
    assert all('generate' not in r and (r['n'] == 0 or 0 <= r['fill_bidirectional'] <= 1)
               for r in bat['tasks'].values())
    with pytest.raises(SystemExit) as e:
        ev.main([f'--out_dir={runs["bigpt"]}', '--infill=True', f'--out={tmp_path}'])
    assert e.value.code == 2 and 'trained with causal=False' in capsys.readouterr().err
    import sample     # nor does sample.py generate from it
    with pytest.raises(SystemExit) as e:
        sample.main([f'--out_dir={runs["bigpt"]}', '--start=add 1+2 =', '--max_new_tokens=2'])
    assert e.value.code == 2 and 'trained with causal=False' in capsys.readouterr().err


def test_textnca_steps_gates_and_Ts_sweep(runs, tmp_path):
    out = ev.main([f'--out_dir={runs["textnca"]}', '--nca_steps=True', '--gates=True', '--sweep=Ts=1,2,3',
                   f'--out={tmp_path}'])
    steps = json.load(open(tmp_path / 'nca_steps.json'))
    assert steps['steps'] == ['emb', 'S1.1', 'S1.2', 'S2.1', 'S2.2'] and steps['series'] == 1
    # the last step's loss is the model's loss
    assert steps['loss'][-1] == pytest.approx(logged_val(runs['textnca']), abs=1e-5)
    gates = json.load(open(tmp_path / 'gates.json'))
    assert len(gates['update_mean']) == 4 and gates['series'] == 2   # update and reset gates
    sweep = json.load(open(tmp_path / 'sweep_Ts.json'))
    assert sweep['values'] == [1, 2, 3] and 'fit' not in sweep and sweep['series'] == 1
    assert out['sweep']['loss'][1] == pytest.approx(logged_val(runs['textnca']), abs=1e-5)


def test_compare_table_and_curves(runs, tmp_path, capsys):
    res = ev.main(['--compare', runs['gpt'], runs['parcae'], '--extrapolate=32,64', f'--out={tmp_path}'])['compare']
    table = capsys.readouterr().out
    assert '| gpt |' in table and '| parcae |' in table
    saved = json.load(open(tmp_path / 'compare.json'))
    assert [r['model'] for r in saved['runs']] == ['gpt', 'parcae']
    assert saved['runs'][0]['val_loss'] == pytest.approx(logged_val(runs['gpt']))
    assert saved['runs'][0]['tokens'] == 4 * 4 * 32
    assert saved['series'] == 4                      # train + val curve per run
    assert res['runs'][1]['params'] == run_folder.load_checkpoint(runs['parcae'])[0].num_params()
    ext = json.load(open(tmp_path / 'extrapolate.json'))     # both runs in one figure
    assert ext['series'] == 2 and [r['model'] for r in ext['runs']] == ['gpt', 'parcae']
    assert ext['runs'][0]['rows'][1]['loss'] is None and ext['runs'][1]['rows'][1]['loss'] is not None


def test_bad_input_is_one_line(runs, capsys):
    for args in (['--num_recurr=3'], ['--sweep=Ts=1,2'], ['--stream=True', '--eval_iters=3'], ['--sweep=num_recur'],
                 ['--extrapolate=abc'], ['--infill=yes']):
        with pytest.raises(SystemExit) as e:
            ev.main([f'--out_dir={runs["parcae"]}', *args])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith('error: ') and err.count('\n') == 1, err
