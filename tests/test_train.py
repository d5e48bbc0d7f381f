"""The trainer: loss falls, exact resume, DDP, compile, dry runs, and one-line errors."""
import json
import os
import shlex
import shutil
import weakref

import numpy as np
import pytest
import torch

import configurator
import data
import models
import run_folder
from conftest import ROOT, copy_checkout, get_batch, make_char_dataset, read_log, run_pasted, run_script, train_script

TINY = ['--dataset=tiny', '--n_layer=2', '--n_head=2', '--n_embd=32', '--block_size=32', '--batch_size=8',
        '--eval_iters=2', '--log_interval=1', '--compile=False']


def train(data_dir, out_dir, *args, **kw):
    return run_script('train.py', f'--data_dir={data_dir}', f'--out_dir={out_dir}', *TINY, *args, **kw)


@pytest.fixture(scope='module')
def run4(char_data, tmp_path_factory):
    """One 4-iteration run (evals at 0, 2, 4); tests copy it rather than each training its own."""
    out = tmp_path_factory.mktemp('run4') / 'o'
    train(char_data, out, '--max_iters=4', '--eval_interval=2')
    return out


def copy_of(run, tmp_path):
    import shutil
    return shutil.copytree(run, tmp_path / 'o')


def test_loss_falls_and_checkpoint_written(char_data, tmp_path):
    out = tmp_path / 'out'
    train(char_data, out, '--max_iters=60', '--eval_interval=30', '--learning_rate=3e-3', '--warmup_iters=5')
    evals = read_log(out, 'eval')
    assert [e['iter'] for e in evals] == [0, 30, 60]
    # against what a model that reads no context can reach, the unigram entropy of the data (2.49):
    # measured over seeds 1337, 1, 2 and 1 and 2 threads, 1.65-1.73 at iter 60 (2.85 at iter 0),
    # so the bound keeps 0.36 nats below it and 0.4 above the unigram loss
    ids = np.fromfile(os.path.join(char_data, 'tiny', 'train.bin'), dtype=np.uint16)
    p = np.bincount(ids) / len(ids)
    unigram = -(p[p > 0] * np.log(p[p > 0])).sum()
    assert evals[-1]['val_loss'] < unigram - 0.4, (unigram, evals)
    ckpt = torch.load(out / 'ckpt.pt', weights_only=False)
    assert ckpt['iter_num'] == 60 and ckpt['model_name'] == 'gpt' and ckpt['meta']['tokenizer'] == 'char'
    assert not os.path.exists(out / 'ckpt.pt.tmp')
    assert all(0 < r['mfu'] <= 1 for r in read_log(out))   # a CPU's measured peak never undercounts


def test_resume_is_bit_exact(char_data, tmp_path):
    common = ['--eval_interval=6', '--lr_decay_iters=12', '--warmup_iters=3', '--dropout=0.1']
    a, b = tmp_path / 'a', tmp_path / 'b'
    train(char_data, a, '--max_iters=12', *common)
    train(char_data, b, '--max_iters=6', *common)
    train(char_data, b, '--max_iters=12', '--init_from=resume', *common)
    la = {r['iter']: r['loss'] for r in read_log(a)}
    lb = {r['iter']: r['loss'] for r in read_log(b)}
    assert sorted(la) == list(range(12))
    assert all(la[i] == lb[i] for i in la), [(i, la[i], lb[i]) for i in la if la[i] != lb[i]]


def test_resume_exact_with_muon_and_accumulation(char_data, tmp_path):
    common = ['--eval_interval=4', '--schedule=constant', '--warmup_iters=2', '--optimizer=muon',
              '--muon_weight_decay=0.1', '--gradient_accumulation_steps=2']
    a, b = tmp_path / 'a', tmp_path / 'b'
    train(char_data, a, '--max_iters=8', *common)
    train(char_data, b, '--max_iters=4', *common)
    train(char_data, b, '--max_iters=8', '--init_from=resume', *common)
    la = {r['iter']: r['loss'] for r in read_log(a)}
    lb = {r['iter']: r['loss'] for r in read_log(b)}
    assert sorted(la) == list(range(8)) and la == lb


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU: the CUDA generator is saved and restored')
def test_resume_is_exact_on_cuda_where_parcae_draws_its_state(char_data, tmp_path):
    # Parcae draws h_0 on the device's generator: without the CUDA RNG in the checkpoint the resumed
    # run would draw other states
    common = [f'--data_dir={char_data}', '--dataset=tiny', '--model=parcae', '--n_embd=32', '--n_head=2',
              '--block_size=32', '--batch_size=8', '--eval_iters=2', '--log_interval=1', '--eval_interval=4',
              '--device=cuda', '--dtype=float32', '--compile=False']
    a, b = tmp_path / 'a', tmp_path / 'b'
    run_script('train.py', f'--out_dir={a}', '--max_iters=8', *common)
    run_script('train.py', f'--out_dir={b}', '--max_iters=4', *common)
    run_script('train.py', f'--out_dir={b}', '--max_iters=8', '--init_from=resume', *common)
    assert {r['iter']: r['loss'] for r in read_log(a)} == {r['iter']: r['loss'] for r in read_log(b)}


def test_a_training_step_keeps_no_logits(char_data, tmp_path, monkeypatch):
    # the logits (B x T x vocab: GBs at a 32k vocabulary) must be freed before the next step's
    # forward; `_, loss = model(...)` kept them alive until it was assigned again
    T = train_script()
    build, refs, alive = T.train.__globals__['build_model'], [], []

    def tracked(name, cfg):
        m = build(name, cfg)
        forward = m.forward

        def spy(idx, targets=None):
            if m.training:
                alive.append(any(r() is not None for r in refs))
            logits, loss = forward(idx, targets)
            if m.training:
                refs.append(weakref.ref(logits))
            return logits, loss
        m.forward = spy
        return m
    monkeypatch.setitem(T.train.__globals__, 'build_model', tracked)
    T.main([f'--data_dir={char_data}', f'--out_dir={tmp_path}/out', *TINY, '--max_iters=4', '--eval_interval=4'])
    assert len(alive) == 4 and not any(alive), alive


def test_ddp_two_gloo_processes(char_data, tmp_path):
    # gradient_accumulation_steps counts micro-batches over all ranks (nanoGPT): 4 over 2 ranks is
    # 2 each, and an iteration holds 8 x 32 x 4 tokens whatever the world size
    out = tmp_path / 'ddp'
    ddp = ('torch.distributed.run', '--standalone', '--nproc_per_node=2', 'train.py', f'--data_dir={char_data}')
    p = run_script(*ddp, f'--out_dir={out}', *TINY, '--max_iters=6', '--eval_interval=3',
                   '--gradient_accumulation_steps=4', module=True, timeout=300)
    assert 'world 2' in p.stdout and '1,024 tokens/iter' in p.stdout
    evals = read_log(out, 'eval')
    assert [e['iter'] for e in evals] == [0, 3, 6]
    ckpt = torch.load(out / 'ckpt.pt', weights_only=False)
    assert len(ckpt['rng']) == len(ckpt['cuda_rng']) == 2   # every rank's generators, the device's too (None on a CPU)
    # every rank takes the checkpoint decision from the same number: the eval set of one process
    # (batch k scored by rank k % 2, the sums reduced), recomputed here from the saved weights
    model, ckpt = run_folder.load_checkpoint(out)
    model.eval()
    cfg = ckpt['config']
    with torch.no_grad():
        per_batch = [model(*get_batch(cfg, 'val', -1 - k)[:2])[1].item() for k in range(cfg['eval_iters'])]
    logged = {e['iter']: e['val_loss'] for e in evals}[ckpt['iter_num']]
    assert abs(per_batch[0] - per_batch[1]) > 1e-3     # a rank that scored only its own batch would be caught
    assert logged == pytest.approx(sum(per_batch) / 2, abs=1e-5)


def test_batches_are_a_function_of_the_iteration_alone(char_data, tmp_path):
    # an iteration's sequences, read as the ranks' micro-steps in order, are one process's whatever
    # the world size and micro-batch split: windows, mixed-in synthetic rows with their task holes,
    # stride holes, and the blocks sampler
    from conftest import make_char_dataset
    make_char_dataset(str(tmp_path), name='tiny', n_chars=4000, seed=1)    # the same tokenizer, other text
    n = os.path.getsize(tmp_path / 'tiny' / 'train.bin') // 2
    marks = np.zeros(n, dtype=np.uint8)
    marks[np.arange(n) % 23 < 3] = 1
    marks.tofile(tmp_path / 'tiny' / 'train_answers.bin')
    os.makedirs(tmp_path / 'data' / 'tiny')
    for f in ('train.bin', 'val.bin', 'meta.json'):
        os.symlink(os.path.join(char_data, 'tiny', f), tmp_path / 'data' / 'tiny' / f)
    os.symlink(tmp_path / 'tiny', tmp_path / 'data' / 'synth')
    base = {'data_dir': str(tmp_path / 'data'), 'dataset': 'tiny', 'block_size': 16, 'batch_size': 4,
            'gradient_accumulation_steps': 4}
    for extra in ({}, {'p_fill': 0.5, 'p_synth': 0.5, 'synth_dataset': 'synth'}, {'sampler': 'blocks'}):
        cfg = {**base, **extra}
        whole = {}
        for world in (1, 2, 4, 8):
            n_micro, accum = data.split_batch({**train_script().DEFAULTS, **cfg}, world)
            parts = [get_batch(cfg, 'train', 5, micro, rank, world, mask=99)
                     for rank in range(world) for micro in range(accum)]
            whole[world] = [torch.cat([p[i] for p in parts]) if parts[0][i] is not None else None for i in range(3)]
        for world in (2, 4, 8):
            assert all(a is None and b is None or torch.equal(a, b) for a, b in zip(whole[1], whole[world])), (extra, world)
        if extra.get('p_fill'):
            holes = whole[1][2]
            assert holes.any() and (whole[1][0][holes] == 99).all()
        assert not torch.equal(whole[1][0], get_batch(cfg, 'train', 6, 0, 0, 1, mask=99)[0][:4])   # another iteration


def test_a_dataset_prepared_anew_under_a_run_changes_nothing_it_reads(char_data, tmp_path):
    # prepare_data.py writes a dataset beside and swaps it in: a run keeps the files it opened
    import shutil
    shutil.copytree(os.path.join(char_data, 'tiny'), tmp_path / 'tiny')
    cfg = {**train_script().DEFAULTS, 'data_dir': str(tmp_path), 'dataset': 'tiny', 'block_size': 16, 'batch_size': 4}
    streams, record = data.open_streams(data.data_streams(cfg))
    before = data.draw_batch('train', 3, 0, cfg, streams, None)[0]
    for split in ('train', 'val'):
        np.zeros(5000, dtype=np.uint16).tofile(tmp_path / f'{split}.new')
        os.replace(tmp_path / f'{split}.new', tmp_path / 'tiny' / f'{split}.bin')
    assert torch.equal(data.draw_batch('train', 3, 0, cfg, streams, None)[0], before) and before.any()
    now = data.open_streams(data.data_streams(cfg))[1]
    assert now['train']['bytes'] == 10000 != record['train']['bytes'] and now['val']['head'] != record['val']['head']


def test_a_resume_at_another_world_size_continues_or_says_why_not(char_data, tmp_path):
    # two gloo ranks train 2 iterations, one process continues to 4: its eval at 4 is the
    # uninterrupted one-process run's, to the rounding of the summed gradients
    common = ['--max_iters=4', '--lr_decay_iters=4', '--eval_interval=2', '--gradient_accumulation_steps=2', '--warmup_iters=0']
    a, b, c = tmp_path / 'a', tmp_path / 'b', tmp_path / 'c'
    train(char_data, a, *common)
    ddp = ('torch.distributed.run', '--standalone', '--nproc_per_node=2', 'train.py', f'--data_dir={char_data}')
    run_script(*ddp, f'--out_dir={b}', *TINY, *common, '--max_iters=2', module=True, timeout=300)
    train(char_data, b, *common, '--init_from=resume')
    train(char_data, c, *common, '--seed=7')    # other batches: what a resume on other batches would log
    val = {d: {e['iter']: e['val_loss'] for e in read_log(d, 'eval')} for d in (a, b, c)}
    assert abs(val[b][4] - val[a][4]) < 1e-4 and abs(val[b][2] - val[a][2]) < 1e-4, val
    assert abs(val[c][4] - val[a][4]) > 1e-3, val
    # a model that draws random numbers in training (dropout) draws them per process: refused in one line
    T = train_script()
    cfg = {**T.DEFAULTS, 'model': 'gpt', 'out_dir': str(b), 'n_layer': 1, 'n_head': 2, 'n_embd': 16, 'vocab_size': 13}
    xy = (torch.zeros(1, 8, dtype=torch.long), torch.zeros(1, 8, dtype=torch.long))
    given = configurator.Settings(argv=[f'--out_dir={b}', '--init_from=resume'])
    run_folder.check_world(cfg, given, {'rng': [None, None]}, models.build_model('gpt', cfg), xy, 1)
    with pytest.raises(T.ConfigError, match='trained by 2 process.*torchrun --standalone --nproc_per_node=2'):
        run_folder.check_world({**cfg, 'dropout': 0.1}, given, {'rng': [None, None]},
                               models.build_model('gpt', {**cfg, 'dropout': 0.1}), xy, 1)


def test_torchrun_with_the_default_arguments(tmp_path):
    # batch_size 16 x gradient_accumulation_steps 1 over 2 processes: 8 sequences each, the same
    # 2,048 tokens per iteration as one process
    ddp = ('torch.distributed.run', '--standalone', '--nproc_per_node=2', 'train.py', f'--data_dir={tmp_path}/data')
    p = run_script(*ddp, f'--out_dir={tmp_path}/out', '--max_iters=2', '--eval_interval=2', '--eval_iters=1',
                   module=True, timeout=300)
    assert '2,048 tokens/iter (2 x 1 x 8 x 128)' in p.stdout and 'world 2' in p.stdout
    assert [e['iter'] for e in read_log(tmp_path / 'out', 'eval')] == [0, 2]
    # 3 sequences cannot be shared by 2 processes: one line, from rank 0 only, with what to pass
    p = run_script(*ddp, f'--out_dir={tmp_path}/odd', '--batch_size=3', '--max_iters=1', '--eval_iters=1', module=True,
                   check=False, timeout=300)
    assert p.returncode != 0 and p.stderr.count('error: ') == 1, p.stderr
    assert 'do not split over 2 processes: pass --gradient_accumulation_steps=2 (6 sequences)' in p.stderr
    assert 'or --batch_size=2 (2 sequences)' in p.stderr
    assert not os.path.exists(tmp_path / 'odd')
    # each value it proposes, pasted, is a command that runs
    for after, per_iter in (('(6 sequences), ', '768 tokens/iter (2 x 1 x 3 x 128)'),
                            ('(2 sequences), ', '256 tokens/iter (2 x 1 x 1 x 128)')):
        q = run_pasted(p.stderr, after, timeout=300)
        assert per_iter in q.stdout, q.stdout
        shutil.rmtree(tmp_path / 'odd')     # the next command is a new run in that folder too


def test_a_new_run_never_replaces_a_trained_one(char_data, run4, tmp_path):
    out = copy_of(run4, tmp_path)
    ckpt, log = (out / 'ckpt.pt').read_bytes(), (out / 'log.jsonl').read_bytes()
    p = train(char_data, out, '--max_iters=4', check=False)
    assert p.returncode == 2 and '--init_from=resume' in p.stderr and '--overwrite=True' in p.stderr
    p = train(char_data, out, '--eval_only=True', '--init_from=resume')
    assert 'step 4: train loss' in p.stdout
    assert (out / 'ckpt.pt').read_bytes() == ckpt and (out / 'log.jsonl').read_bytes() == log
    # the explicit opt-in replaces the run, and the new log holds only the new run
    train(char_data, out, '--max_iters=2', '--eval_interval=2', '--overwrite=True')
    assert [r['iter'] for r in read_log(out, 'eval')] == [0, 2] and [r['iter'] for r in read_log(out)] == [0, 1]
    assert torch.load(out / 'ckpt.pt', weights_only=False)['iter_num'] == 2


def test_resume_continues_the_log_without_repeats(char_data, run4, tmp_path):
    out = copy_of(run4, tmp_path)
    with open(out / 'log.jsonl', 'a') as f:   # the interrupted run got past its last checkpoint
        f.write(json.dumps({'kind': 'train', 'iter': 4, 'loss': 99.0}) + '\n{"kind": "tra')
    train(char_data, out, '--max_iters=6', '--eval_interval=3', '--init_from=resume')
    recs = [json.loads(line) for line in open(out / 'log.jsonl')]
    assert [r['iter'] for r in recs if r['kind'] == 'train'] == list(range(6))
    assert [r['iter'] for r in recs if r['kind'] == 'eval'] == [0, 2, 4, 6]   # 4: where the resumed run starts
    assert all(r['loss'] < 99 for r in recs if r['kind'] == 'train')


def test_dry_run_counts_gpt2_124m(tmp_path):
    p = run_script('train.py', '--dry_run=True', '--vocab_size=50304', '--n_layer=12', '--n_head=12',
                   '--n_embd=768', '--block_size=1024', f'--data_dir={tmp_path}')
    assert 'parameters: 124475904' in p.stdout
    assert 'flops_per_token:' in p.stdout


def test_bad_inputs_give_one_clear_line(char_data, tmp_path):
    cases = [
        (['--lerning_rate=1e-3'], "unknown config key 'lerning_rate' (did you mean: learning_rate"),
        (['--max_iters=ten'], "config key 'max_iters' expects int"),
        (['config/nope.py'], 'config file not found: config/nope.py'),
        (['--dataset=missing'], 'prepare the data first (python prepare_data.py missing --input FILE)'),
        (['--model=transformerx'], "unknown model 'transformerx'"),
        (['--init_from=resume', f'--out_dir={tmp_path}/none'], "no checkpoint at"),
        (['--seed=100000000000000000000000'], 'seed must be an integer from 0 to 2**63 - 1'),
        (['--dataset='], "dataset: dataset name '' must be a plain folder name: letters, digits, _ . - (not starting "
                         "with .)"),
        (['--dataset=' + '../' * 3 + 'etc'], "etc' must be a plain folder name: letters, digits, _ . -"),
    ]
    for args, msg in cases:
        p = run_script('train.py', f'--data_dir={char_data}', '--dataset=tiny', *args, check=False)
        assert p.returncode == 2, (args, p.stderr)
        assert msg in p.stderr, (args, p.stderr)
        assert 'Traceback' not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_resume_refuses_a_checkpoint_of_another_model(char_data, run4, tmp_path):
    out = copy_of(run4, tmp_path)
    ckpt = torch.load(out / 'ckpt.pt', weights_only=False)
    ckpt['model_name'] = 'mamba2'
    torch.save(ckpt, out / 'ckpt.pt')
    p = train(char_data, out, '--init_from=resume', '--model=gpt', check=False)
    assert p.returncode == 2 and "holds a 'mamba2' model but this config builds 'gpt'" in p.stderr


def test_resume_checks_keys_against_the_runs_own_model(char_data, tmp_path):
    # no --model on the resume line: a Parcae field given at its checkpoint's value is the run's own
    # key, not an unknown one; given at another value it is a refusal that names it
    common = [f'--data_dir={char_data}', '--dataset=tiny', '--n_embd=32', '--n_head=2', '--block_size=32',
              '--batch_size=4', '--eval_iters=1', '--eval_interval=2', '--compile=False', f'--out_dir={tmp_path}/p']
    run_script('train.py', *common, '--model=parcae', '--max_iters=2')
    run_script('train.py', *common, '--init_from=resume', '--max_iters=3', '--mean_recurrence=8')
    p = run_script('train.py', *common, '--init_from=resume', '--max_iters=4', '--mean_recurrence=2', check=False)
    assert p.returncode == 2 and 'mean_recurrence=2' in p.stderr and 'Traceback' not in p.stderr, p.stderr


def test_nan_loss_stops_and_keeps_last_good_checkpoint(char_data, tmp_path):
    out = tmp_path / 'nan'
    p = train(char_data, out, '--max_iters=10', '--eval_interval=2', '--learning_rate=1e30', '--warmup_iters=0',
              '--schedule=constant', '--grad_clip=0.0', check=False)
    assert p.returncode == 2 and ('not finite' in p.stderr or 'training loss is' in p.stderr), p.stderr
    ckpt = torch.load(out / 'ckpt.pt', weights_only=False)
    assert all(torch.isfinite(v).all() for v in ckpt['model'].values())
    # the command it prints starts a new run from those weights, with the run's settings at a tenth of the rate
    assert f'--init_from={out} --out_dir={out}-new' in p.stderr
    run_pasted(p.stderr, 'with a lower learning_rate', check=False)
    again = json.load(open(f'{out}-new/config.json'))
    assert again['learning_rate'] == 1e29 and again['init_from'] == str(out) and again['n_embd'] == 32


@pytest.mark.slow   # inductor codegen, 40 s; test_compile.py's test_graphs_bounded[gpt_140m] runs train.py with compile=True
def test_compile_smoke(char_data, tmp_path):
    train(char_data, tmp_path / 'c', '--max_iters=2', '--eval_interval=2', '--compile=True')


def test_default_run_uses_offline_synthetic_data(tmp_path):
    p = run_script('train.py', f'--data_dir={tmp_path}/data', f'--out_dir={tmp_path}/out', '--max_iters=3',
                   '--eval_interval=3', '--eval_iters=1')
    assert os.path.isfile(tmp_path / 'data' / 'synthetic' / 'meta.json')
    assert os.path.isfile(tmp_path / 'out' / 'ckpt.pt')
    assert 'step 3' in p.stdout


def test_causal_false_needs_a_gpt_and_holes(char_data, tmp_path):
    # a bidirectional (BERT-style) run: full attention is a GPT's, and without holes it has nothing to learn
    cases = [
        (['--model=fon', '--p_fill=0.5'], "causal=False needs model 'gpt'"),
        (['--model=mamba2', '--p_fill=0.5'], "causal=False needs model 'gpt'"),
        (['--model=gpt'], 'causal=False trains on holes only'),
        (['--model=gpt', '--p_fill=0.5', '--windows=8'], 'causal=False needs global attention layers'),
    ]
    for args, msg in cases:
        p = run_script('train.py', f'--data_dir={char_data}', '--dataset=tiny', '--causal=False', *args,
                       f'--out_dir={tmp_path}/o', '--max_iters=0', check=False)
        assert p.returncode == 2 and msg in p.stderr and 'Traceback' not in p.stderr, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not os.path.exists(tmp_path / 'o')


def test_causal_false_trains_and_evaluates_at_the_holes_only(char_data, tmp_path, monkeypatch):
    # the step reads the holed batch with full attention, and its targets are the holes' tokens alone
    T = train_script()
    build, seen = T.train.__globals__['build_model'], []

    def tracked(name, cfg):
        m = build(name, cfg)
        forward = m.forward

        def spy(idx, targets=None, causal=True):
            seen.append((m.training, idx.clone(), targets.clone(), causal))
            return forward(idx, targets, causal=causal)
        m.forward = spy
        return m
    monkeypatch.setitem(T.train.__globals__, 'build_model', tracked)
    args = [*TINY, '--causal=False', '--p_fill=0.5', '--max_iters=1', '--eval_interval=1', '--batch_size=16']
    T.main([f'--data_dir={char_data}', f'--out_dir={tmp_path}/out', *args])
    meta = json.load(open(os.path.join(char_data, 'tiny', 'meta.json')))
    mask = meta['vocab_size']
    cfg = {'data_dir': str(char_data), 'dataset': 'tiny', 'block_size': 32, 'batch_size': 16, 'p_fill': 0.5,
           'causal': False}
    x, y, holes = get_batch(cfg, 'train', 0, mask=mask)
    steps = [s for s in seen if s[0]]
    assert len(steps) == 1 and all(not causal for *_, causal in seen)    # training and eval: full attention
    _, idx, targets, _ = steps[0]
    assert holes.any() and (~holes).any() and torch.equal(idx, x) and (x[holes] == mask).all()
    assert torch.equal(targets[holes], y[holes]) and (targets[~holes] == -1).all()
    # eval: every sequence holed, scored at its holes only
    ex, ey, eholes = get_batch(cfg, 'val', -1, mask=mask)
    evals = [s for s in seen if not s[0] and torch.equal(s[1], ex)]
    assert eholes.any() and evals and (evals[0][2][~eholes] == -1).all()
    assert torch.equal(evals[0][2][eholes], ey[eholes])
    # so the loss moves with a hole's target and not with any other
    torch.manual_seed(0)
    shape = {'n_layer': 2, 'n_head': 2, 'n_embd': 32, 'vocab_size': mask + 1}
    m = models.build_model('gpt', {**T.DEFAULTS, **cfg, **shape})
    loss = lambda t: m(x, data.hole_targets(t, holes), causal=False)[1].item()
    others, one_hole = y.clone(), y.clone()
    others[~holes] = (others[~holes] + 1) % mask
    b, t = holes.nonzero()[0].tolist()
    one_hole[b, t] = (one_hole[b, t] + 1) % mask
    assert loss(others) == loss(y) and loss(one_hole) != loss(y)
    none = m(x, data.hole_targets(y, torch.zeros_like(holes)), causal=False)[1]   # no hole: a finite step that adds nothing
    none.backward()
    assert none.item() == 0.0 and all(p.grad is None or not p.grad.any() for p in m.parameters())


# ----------------------------------------------------------------------------- the quick start, and the hints pasted
def readme_quick_start():
    """The README's quick start: its two commands (pip's part dropped) and the text that follows them."""
    text = open(os.path.join(ROOT, 'README.md')).read().split('## Quick start', 1)[1]
    block, after = text.split('```', 2)[1:]
    first, second = [shlex.split(ln.split('&&')[-1]) for ln in block.strip().splitlines()]
    return first, second, after


def test_the_readmes_two_commands_in_order(char_data, tmp_path):
    # the README's first run, cut to two iterations, then its sample command; a later command into that
    # out_dir with a typo'd --dataset hears of the dataset (a settings check comes before out_dir's), and
    # the trained run's hints, pasted, continue it or replace it
    first, second, _ = readme_quick_start()
    assert first[:2] == ['python', 'train.py'] and second[:2] == ['python', 'sample.py'], (first, second)
    here = copy_checkout(tmp_path / 'checkout')
    assert not os.path.exists(os.path.join(here, 'results', 'runs'))
    run_script(*first[1:], '--max_iters=2', '--eval_iters=2', cwd=here)
    out = dict(a[2:].split('=', 1) for a in second if a.startswith('--'))['out_dir']
    assert os.path.isfile(os.path.join(here, out, 'ckpt.pt'))
    assert len(run_script(*second[1:], cwd=here).stdout.strip()) >= 1
    p = run_script(*first[1:], f'--data_dir={char_data}', '--dataset=missing', check=False, cwd=here)
    assert p.returncode == 2 and 'prepare the data first (python prepare_data.py missing --input FILE)' in p.stderr, p.stderr
    p = run_script(*first[1:], '--max_iters=2', '--eval_iters=2', check=False, cwd=here)
    assert p.returncode == 2 and 'holds a trained run' in p.stderr, p.stderr
    assert 'step 2:' in run_pasted(p.stderr, 'continue it with', cwd=here).stdout
    assert 'iter 0:' in run_pasted(p.stderr, 'replace it (and its log) with', cwd=here).stdout


def test_the_readmes_prompts_are_the_tasks_it_trained_on():
    # the prompts of the quick start's table are examples of the first run's tasks, the answers it gives
    # for them are the tasks' own, and the sample command asks one of them
    import re
    import battery
    first, second, after = readme_quick_start()
    tasks = battery.DATASETS[configurator._read_file(os.path.join(ROOT, first[2]))['dataset'][0]]
    rows = re.findall(r'^\| `([^`]+)` \| `([^`]+)` \|', after, re.M)
    asked = dict(a[2:].split('=', 1) for a in second if a.startswith('--'))['start']
    assert len(rows) >= 2 and asked in dict(rows), (rows, second)
    for prompt, answer in rows:   # mem_l: 'meml D', 10-20 words of three lowercase letters, ' ='
        name, digit, *words, eq = prompt.split()
        assert (name, eq, answer) == ('meml', '=', digit) and 'mem_l' in tasks and 10 <= len(words) <= 20, prompt
        assert all(len(w) == 3 and w.isalpha() and w.islower() for w in words), prompt


def test_the_commands_a_refusal_prints_run_when_pasted(char_data, run4, tmp_path):
    out = copy_of(run4, tmp_path)
    for args, after, says in [
        (['--eval_only=True'], 'to evaluate it:', 'step 4: train loss'),
        (['--init_from=resume', '--batch_size=4', '--max_iters=5'], 'continue it as it was:', 'iter 4:'),
        (['--init_from=resume', '--max_iters=2'], 'or evaluate it:', 'step 5: train loss'),
        (['--init_from=resume', f'--out_dir={tmp_path}/none', '--max_iters=1'], 'a new run:', 'iter 0:'),
    ]:
        p = train(char_data, out, *args, check=False)
        assert p.returncode == 2 and after in p.stderr, (args, p.stderr)
        assert says in run_pasted(p.stderr, after).stdout, args


def test_a_resume_on_changed_data_prints_a_new_run_that_runs(tmp_path):
    # prepared anew with the same characters: the resume refuses, and a new run from its weights
    # on the new data needs the run's model, data and vocabulary, all of which the command names
    data = make_char_dataset(str(tmp_path / 'data'))
    out = tmp_path / 'p'
    common = [f'--data_dir={data}', '--dataset=tiny', '--model=parcae', '--n_embd=32', '--n_head=2', '--block_size=32',
              '--batch_size=4', '--eval_iters=1', '--compile=False', f'--out_dir={out}']
    run_script('train.py', *common, '--max_iters=2', '--p_fill=0.5')
    make_char_dataset(data, n_chars=30_000, seed=3)
    p = run_script('train.py', f'--out_dir={out}', f'--data_dir={data}', '--init_from=resume', '--max_iters=4', check=False)
    assert p.returncode == 2 and 'is not what the checkpoint trained on' in p.stderr, p.stderr
    p = run_pasted(p.stderr, 'on this data:')
    assert f'{out}-new/ckpt.pt holds iter 4' in p.stdout


def test_a_resume_at_a_world_size_its_batch_does_not_split_over_names_those_it_does(char_data, tmp_path):
    out = tmp_path / 'b3'
    train(char_data, out, '--batch_size=3', '--max_iters=2', '--eval_interval=2')
    ddp = ('torch.distributed.run', '--standalone', '--nproc_per_node=2', 'train.py')
    p = run_script(*ddp, f'--data_dir={char_data}', f'--out_dir={out}', '--init_from=resume', '--max_iters=4', module=True,
                   check=False, timeout=300)
    assert p.returncode != 0 and 'continues at 1 or 3 processes, as it ran:' in p.stderr, p.stderr
    p = run_pasted(p.stderr, 'as it ran:')
    assert f'{out}/ckpt.pt holds iter 4' in p.stdout     # with this command's --max_iters


@pytest.mark.slow   # 17-56 s on 2 cores: the suite keeps to CI's 15 minutes
def test_a_resume_of_a_model_that_draws_per_process_prints_its_own_world(char_data, tmp_path):
    # dropout draws from each process's generator: trained by 2, resumed by 1 with --max_iters=4; the
    # hint is torchrun with 2 and that --max_iters (Parcae's seeded draws resume anywhere: test_scale.py)
    out = tmp_path / 'p2'
    common = [f'--data_dir={char_data}', '--dataset=tiny', '--dropout=0.1', '--n_layer=1', '--n_embd=32', '--n_head=2', '--block_size=32',
              '--batch_size=4', '--eval_iters=1', '--compile=False', f'--out_dir={out}']
    run_script('torch.distributed.run', '--standalone', '--nproc_per_node=2', 'train.py', *common, '--max_iters=2',
               module=True, timeout=300)
    p = run_script('train.py', f'--data_dir={char_data}', f'--out_dir={out}', '--init_from=resume', '--max_iters=4',
                   check=False)
    assert p.returncode == 2 and 'resume it as it ran: torchrun --standalone --nproc_per_node=2' in p.stderr, p.stderr
    p = run_pasted(p.stderr, 'resume it as it ran:')
    assert f'{out}/ckpt.pt holds iter 4' in p.stdout
