"""The memory estimate of --dry_run=True: one training step run on the meta device against the
same step run on the CPU, whose allocations and frees the profiler records, for every model; the
optimizer states against a real optimizer's; the printed parts, total and verdict."""
import itertools
import re

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import models
import train
from conftest import train_script

B, T = 8, 64


def tiny(name, **kw):
    if name == 'parcae':   # a shallower loop: the same code at a third of the ops
        kw = {'mean_recurrence': 3, 'mean_backprop_depth': 2, **kw}
    return {**train.DEFAULTS, 'model': name, 'vocab_size': 65, 'block_size': T, 'n_layer': 2, 'n_embd': 64,
            'n_head': 4, 'dtype': 'float32', **kw}


def real_step(cfg, accum, autocast=None):
    """(model, optimizers, bytes a second training step allocates above what it starts with at its
    peak, from the profiler's [memory] events in time order)."""
    torch.manual_seed(0)
    model = models.build_model(cfg['model'], cfg)
    model.train()
    opts = train.configure_optimizers(model, cfg, 'cpu')
    kw = models.deepest_knobs(model, cfg)

    def step():
        for _ in range(accum):
            x = torch.randint(0, cfg['vocab_size'], (B, cfg['block_size']))
            with autocast or torch.autocast('cpu', enabled=False):
                loss = model(x, x, **kw)[1] / accum
            loss.backward()
            del loss
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg['grad_clip'])
        for opt in opts:
            opt.step()
            opt.zero_grad(set_to_none=True)
    step()   # the first step makes the optimizer states
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == '[memory]')
    return model, opts, max(itertools.accumulate(n for _, n in events))


def step_bytes(est):
    return est['total'] - est['weights'] - est['optimizer']


# the issue asks for 25%; every model measured within 6% in fp32 (three exactly) when this was written.
# GPT at 256 tokens: there the T x T weights of unfused attention would double the step's bytes
@pytest.mark.parametrize('name', list(models.MODELS))
def test_estimate_matches_the_profiled_step(name):
    cfg = tiny(name, **({'block_size': 256} if name == 'gpt' else {}))
    est = models.estimate_memory(cfg, B, 1, train.configure_optimizers, device_type='cpu')
    model, opts, measured = real_step(cfg, 1)
    assert est['weights'] == models.storage_bytes(list(model.parameters()) + list(model.buffers()))
    assert abs(step_bytes(est) / measured - 1) < 0.25, (step_bytes(est), measured)
    # the step's own bytes are most of the peak at this shape, so a part left out would show
    assert step_bytes(est) > 2 * (est['weights'] + est['optimizer'])
    assert est['total'] == est['weights'] + est['optimizer'] + est['activations'] + est['grads_at_peak']


def test_gradient_accumulation_and_muon_states():
    """Two micro-steps: the second runs with every gradient held; Muon's and ParcaeMuon's states are
    the real optimizers' to the byte."""
    for variant in ('torch', 'parcae'):
        cfg = tiny('gpt', optimizer='muon', muon_variant=variant)
        one = models.estimate_memory(cfg, B, 1, train.configure_optimizers, device_type='cpu')
        est = models.estimate_memory(cfg, B, 2, train.configure_optimizers, device_type='cpu')
        model, opts, measured = real_step(cfg, 2)
        assert abs(step_bytes(est) / measured - 1) < 0.25, (step_bytes(est), measured)
        assert est['grads_at_peak'] == est['gradients'] > one['grads_at_peak']
        real = {type(o).__name__: models.storage_bytes([t for s in o.state.values() for t in s.values()
                                                         if isinstance(t, torch.Tensor) and t.dim() > 0]) for o in opts}
        assert est['optimizers'] == real and set(real) == {'AdamW', 'Muon' if variant == 'torch' else 'ParcaeMuon'}
        adamw = sum(p.numel() for g in opts[0].param_groups for p in g['params'])
        assert real['AdamW'] == 2 * 4 * adamw   # two fp32 states per parameter


def test_autocast_emulation_follows_cuda_lists():
    """The meta device runs no autocast: the emulation casts as CUDA's lists say, caches a weight's
    cast where grad is on, and honours a model's autocast(enabled=False) region."""
    w = torch.nn.Parameter(torch.randn(8, 8, device='meta'))
    x = torch.randn(4, 8, device='meta')
    with models._MetaRun(torch.bfloat16):
        y = torch.nn.functional.linear(x, w)
        assert y.dtype == torch.bfloat16 and (x @ w).dtype == torch.bfloat16
        assert y.exp().dtype == y.softmax(-1).dtype == torch.nn.functional.layer_norm(y, (8,)).dtype == torch.float32
        assert torch.nn.functional.gelu(y).dtype == torch.bfloat16   # on no list: runs as it comes
        with torch.autocast('meta', enabled=False):
            assert torch.nn.functional.linear(x, w).dtype == torch.float32
        with torch.no_grad():
            torch.nn.functional.linear(x, w)
        y.float().sum().backward()
    assert w.grad is not None and torch.autocast is torch.amp.autocast   # given back on exit
    # bf16 halves what the matmuls keep: GPT's step in bf16 against the same step in fp32, and
    # against the CPU's own autocast (whose lists agree with CUDA's on what GPT runs)
    bf16 = models.estimate_memory(tiny('gpt', dtype='bfloat16'), B, 1, train.configure_optimizers, device_type='cpu')
    fp32 = models.estimate_memory(tiny('gpt'), B, 1, train.configure_optimizers, device_type='cpu')
    assert step_bytes(bf16) < 0.8 * step_bytes(fp32)
    measured = real_step(tiny('gpt', dtype='bfloat16'), 1, torch.autocast('cpu', dtype=torch.bfloat16))[2]
    assert abs(step_bytes(bf16) / measured - 1) < 0.25, (step_bytes(bf16), measured)


def parts(out):
    return {k: float(v) for k, v in re.findall(r'^  (weights|gradients|optimizer states|activations|total): '
                                               r'([\d.]+) GB', out, re.M)}


@pytest.mark.parametrize('shape,verdict', [(['--n_layer=2', '--batch_size=4', '--block_size=256'], 'yes / yes'),
                                           (['--n_layer=1', '--batch_size=24', '--block_size=4096'], 'no / yes'),
                                           (['--n_layer=1', '--batch_size=64', '--block_size=4096'], 'no / no')])
def test_dry_run_prints_the_parts_and_the_verdict(shape, verdict, tmp_path, capsys):
    train_script().main(['--dry_run=True', '--vocab_size=50304', '--n_embd=256', '--n_head=4', f'--data_dir={tmp_path}', *shape])
    out = capsys.readouterr().out
    p = parts(out)
    assert set(p) == {'weights', 'gradients', 'optimizer states', 'activations', 'total'}, out
    held = float(re.search(r'([\d.]+) GB of them held at the peak', out).group(1))
    assert abs(p['total'] - (p['weights'] + p['optimizer states'] + p['activations'] + held)) <= 0.02, out
    assert p['optimizer states'] == pytest.approx(2 * p['weights'], abs=0.01)   # AdamW: two fp32 states
    assert f'fits on a 40 GB / 80 GB GPU: {verdict}' in out, out
    assert 'bfloat16 autocast' in out and 'with torch.compile: not estimated' in out


def test_dry_run_says_when_the_meta_device_cannot_run_the_step(tmp_path, capsys, monkeypatch):
    def cannot(*a, **k):
        raise NotImplementedError("Cannot copy out of meta tensor; no data!")
    monkeypatch.setitem(models.print_sizes.__globals__, 'estimate_memory', cannot)
    train_script().main(['--dry_run=True', '--vocab_size=64', f'--data_dir={tmp_path}'])
    out = capsys.readouterr().out
    assert 'parameters: ' in out
    assert out.splitlines()[-1] == ('peak training memory: not estimated: the meta device cannot run this step '
                                    '(NotImplementedError: Cannot copy out of meta tensor; no data!)')


def test_dry_run_under_torchrun_counts_ddps_buckets_and_names_the_micro_batch_that_fits(tmp_path, capsys, monkeypatch):
    # a step of fixed parts (weights 10, optimizer 10, gradients 5 GiB, all held at the peak) and
    # 2.8 GiB of activations per sequence: 16 sequences are 69.8 GiB, under 80 GB's 72 alone, over it
    # with DDP's 5 GiB of buckets; 8 sequences are 30 + 22.4 = 52.4 GiB
    G = 2 ** 30
    seen = []

    def step(cfg, micro, accum, configure_optimizers):
        seen.append(micro)
        return {'weights': 10 * G, 'gradients': 5 * G, 'optimizer': 10 * G, 'optimizers': {'AdamW': 10 * G},
                'grads_at_peak': 5 * G, 'activations': 2.8 * G * micro, 'saved': 2 * G * micro, 'phase': 'backward',
                'dtype': torch.bfloat16, 'total': (25 + 2.8 * micro) * G}
    monkeypatch.setitem(models.print_sizes.__globals__, 'estimate_memory', step)
    args = ['--dry_run=True', '--vocab_size=64', f'--data_dir={tmp_path}', '--batch_size=16', '--gradient_accumulation_steps=8']
    monkeypatch.setenv('WORLD_SIZE', '1')
    train_script().main(args)
    assert 'fits on a 40 GB / 80 GB GPU: no / yes' in capsys.readouterr().out
    monkeypatch.setenv('WORLD_SIZE', '8')
    train_script().main(args)
    out = capsys.readouterr().out
    assert 'micro-batch 16 x 128 tokens, 1 micro-step(s), world 8' in out
    assert 'fits on a 40 GB / 80 GB GPU: no / no' in out
    assert out.splitlines()[-1].startswith('fits 80 GB with --micro_batch_size=8 (estimated 52.40 GB per GPU'), out
    assert seen[-1] == 8
