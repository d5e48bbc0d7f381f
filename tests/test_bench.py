"""bench.py: every registered model is sized to GPT's parameter count at the shared shape, the
training bench runs end to end at a tiny shape with the promised JSON fields, config files are
measured against the first, decode reports a growing KV cache next to a fixed state, and the GPU
check (tools/gpu_check.py, which bench --gpu_check becomes) runs on a CPU."""
import json
import os

import pytest
import torch

from tools import bench, gpu_check
import models
import train
from conftest import train_script

TINY = ['--block_size=16', '--batch_size=2', '--n_embd=32', '--n_head=2', '--n_layer=2', '--vocab_size=64',
        '--warmup=1', '--iters=2']
FIELDS = {'model', 'params', 'flops_per_token', 'ms_per_step', 'tokens_per_s', 'peak_mem_mb', 'ratio',
          'flops_ratio', 'mfu'}


def test_shared_shape_matches_gpt_parameter_count():
    opt = dict(bench.DEFAULTS)
    configs = dict(bench.shared_configs(bench.registered(opt), opt))
    target = bench.params_of('gpt', configs['gpt'])
    assert len(configs) >= 5
    for name, cfg in configs.items():   # width steps alone (no d_ff to solve, e.g. Mamba2) land within 5%
        tol = 0.01 if 'd_ff' in models.model_fields(name) else 0.05
        assert bench.params_of(name, cfg) == pytest.approx(target, rel=tol), name
    assert configs['parcae']['n_prelude'] + configs['parcae']['n_recur_layers'] + configs['parcae']['n_coda'] == 4


def test_bench_end_to_end_tiny(tmp_path, capsys):
    path = tmp_path / 'bench.json'
    records = bench.main(TINY + [f'--json={path}'])
    saved = json.load(open(path))
    assert [r['model'] for r in saved] == [r['model'] for r in records] and saved[0]['model'] == 'gpt'
    for r in saved:
        assert FIELDS <= set(r), r['model']
        assert r['ms_per_step'] > 0 and r['tokens_per_s'] > 0 and r['peak_mem_mb'] > 0 and r['params'] > 0
        assert r['ratio'] == pytest.approx(r['ms_per_step'] / saved[0]['ms_per_step'])
    assert saved[0]['ratio'] == 1.0
    out = capsys.readouterr().out
    assert '| model | params |' in out and '| gpt |' in out


def test_config_files_first_is_reference(tmp_path):
    a, b = tmp_path / 'tf.py', tmp_path / 'ws.py'
    a.write_text("model = 'gpt'\nn_layer = 1\nn_embd = 32\nn_head = 2\nvocab_size = 64\n")
    b.write_text("model = 'workspace'\nn_embd = 32\nn_head = 2\nd_ff = 64\nvocab_size = 64\n")
    records = bench.main([str(b), str(a), '--batch_size=2', '--block_size=16', '--warmup=1', '--iters=1'])
    assert [r['model'] for r in records] == ['ws', 'tf']
    assert records[0]['ratio'] == 1.0 and records[1]['reference'] == 'ws'
    assert all(r['block_size'] == 16 and r['batch_size'] == 2 for r in records)


def test_cpu_memory_counts_saved_activations():
    cfg = {**train_script().DEFAULTS, 'n_layer': 1, 'n_embd': 32, 'n_head': 2, 'vocab_size': 64, 'block_size': 16}
    sizes = []
    for B in (1, 4):
        model = models.build_model('gpt', cfg)
        opts = train.configure_optimizers(model, cfg, 'cpu')
        x = torch.randint(64, (B, 16))
        sizes.append(bench.cpu_step_bytes(model, opts, lambda: model(x, x)[1]))
    p = sum(q.numel() * 4 for q in model.parameters())
    assert sizes[0] > 4 * p                 # params + grads + two AdamW moments + activations
    assert sizes[1] > sizes[0]              # activations grow with the batch


def test_decode_kv_cache_grows_fixed_state_does_not(tmp_path):
    path = tmp_path / 'decode.json'
    rows = bench.main(['--decode=True', '--models=gpt,fon', '--contexts=(8,24)', '--decode_iters=2',
                       '--n_embd=32', '--n_head=2', '--n_layer=1', '--vocab_size=64', f'--json={path}'])
    got = {(r['model'], r['context']): r for r in json.load(open(path))}
    assert len(rows) == 4 and all(r['ms_per_token'] > 0 for r in rows)
    assert got['gpt', 24]['state_mb'] > got['gpt', 8]['state_mb']
    assert got['fon', 24]['state_mb'] == got['fon', 8]['state_mb']


def test_bad_input_is_one_line(capsys):
    for args in (['--models=gpt,nope'], ['--batch_size=0'], ['--modles=gpt'], ['--iters=0'], ['--iters=-3'],
                 ['--warmup=-1'], ['--decode_iters=0']):
        with pytest.raises(SystemExit) as e:
            bench.main(args)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith('error: ') and err.count('\n') == 1, err


def test_bench_gpu_check_becomes_the_gpu_check_command(monkeypatch):
    # python -m tools.bench --gpu_check (and a worker's --gpu_check_worker) is python -m tools.gpu_check with
    # the same arguments: that module builds on bench, so bench hands the process over instead of importing it
    def execve(exe, argv, env):
        raise SystemExit((exe, argv, env['PYTHONPATH']))
    monkeypatch.setattr(bench.os, 'execve', execve)
    for args in (['--gpu_check', '--models=gpt', '--backend=eager'], ['--gpu_check_worker=config/gpt_140m.py']):
        with pytest.raises(SystemExit) as e:
            bench.main(args)
        exe, argv, path = e.value.code
        assert argv == [exe, '-m', 'tools.gpu_check', *args] and path.split(os.pathsep)[0] == bench.ROOT
    with pytest.raises(SystemExit) as e:   # its options are checked as bench's, before the hand-over
        bench.main(['--gpu_check', '--warm_jobs=0'])
    assert e.value.code == 2


@pytest.mark.slow   # 17-56 s on 2 cores: the suite keeps to CI's 15 minutes
def test_gpu_check_runs_on_cpu(capsys):
    # the one-shot GPU check at tiny shapes (backend eager: dynamo's graphs without inductor's
    # code generation), so that it cannot rot between GPU sessions: every model in its own worker
    # process, then train.py itself, stopped, resumed and compared with the uninterrupted run
    records = gpu_check.main(['--gpu_check', '--backend=eager', '--warmup=1', '--iters=1', '--decode_iters=2'])
    rows = {r['arch']: r for r in records[:-1]}
    assert [r['model'] for r in records[:-1]] == list(gpu_check.GPU_CHECK) and len(rows) == 6
    for arch, r in rows.items():
        assert 'error' not in r, (arch, r['error'])
        assert r['graphs'] >= 1 and r['max_versions'] < torch._dynamo.config.recompile_limit
        assert r['tokens_per_s'] > 0 and r['mfu'] > 0 and r['peak_mem_mb'] > 0
    # the attention kernel, read off the ops a profiled training step ran
    assert {'gpt', 'parcae', 'workspace'} <= {a for a, r in rows.items() if r['sdpa'] == ['FLASH_ATTENTION']}
    assert rows['fon']['sdpa'] == rows['mamba2']['sdpa'] == []
    assert len(rows['parcae']['optimizer_ms']) == len(rows['gpt']['optimizer_ms']) == 2   # AdamW and Muon, each timed
    assert len(rows['fon']['optimizer_ms']) == 1
    for arch in ('gpt', 'parcae', 'textnca', 'fon', 'mamba2'):   # incremental decode = forward, on the device
        assert rows[arch]['decode_gap'] < 1e-4, arch
    assert rows['gpt']['state_mb'][1] > rows['gpt']['state_mb'][0]          # a KV cache grows
    assert rows['fon']['state_mb'][1] == rows['fon']['state_mb'][0]          # O(1) states do not
    assert rows['mamba2']['state_mb'][1] == rows['mamba2']['state_mb'][0]
    trainer = records[-1]
    assert trainer['backend'] == 'gloo' and 'error' not in trainer, trainer
    assert trainer['resume_gap'] == 0.0   # on a CPU the resumed run is the uninterrupted one, bit for bit
    out = capsys.readouterr().out
    assert '| model | params | dtype | batch x T |' in out and '| gpt_140m |' in out and 'train.py x 1 rank(s)' in out


def test_gpu_check_flags_a_recompile_storm():
    # Parcae needs a few versions of its recurrent block by design: with the limit at 1 the check
    # must stop at the limit instead of silently running on in eager
    opt = {**bench.DEFAULTS, 'backend': 'eager', 'warmup': 3, 'iters': 1}
    cfg = bench.tiny(train.resolve_config([os.path.join(bench.ROOT, 'config', 'cpu_parcae.py')]))
    with torch._dynamo.config.patch(recompile_limit=1), pytest.raises(torch._dynamo.exc.FailOnRecompileLimitHit):
        gpu_check.check_model('parcae', {**cfg, 'dtype': 'float32'}, opt, 'cpu', (8, 12))
