"""torch.compile keeps a bounded number of graphs for every model: train.py runs a few training
steps and evals with compile=True in this process, then dynamo's own records are read. The
default suite compiles with backend='eager' (dynamo traces, guards, breaks and recompiles as it
does for inductor, without inductor's code generation: seconds instead of minutes per model).
RUN_SLOW=1 adds every shipped config that way and the CPU demos through inductor."""
import glob
import math
import os

import pytest
import torch

from tools import bench
import models
import train

from conftest import ROOT, read_log, train_script

# one config per model and every shape the loop takes: Parcae's per-sequence depths (nanochat
# setup; the RDM's per-batch depth and linear injection), TextNCA with K = 4 stages and with a
# Ts drawn per batch, FON with holes, Mamba2, the workspace
FAST = ['gpt_140m', 'parcae_140m', 'parcae/rdm_parcae_100m', 'textnca/textnca_k4', 'textnca/textnca_stochastic_t',
        'fon/fon_d256_t1_ft', 'fon_mamba2_d256', 'workspace_small']
LIMIT = torch._dynamo.config.recompile_limit   # 8: past it dynamo gives up on a function (eager from then on)


def compiled_run(path, data_dir, out_dir, backend, monkeypatch, iters=6):
    """train.py on config `path` at bench.TINY_SHAPE with compile=True through `backend`: iters
    training steps, an eval before, halfway and after. A recompile storm raises. Returns
    bench.compile_stats() and the config; the logged losses must be finite."""
    cfg = bench.tiny(train.resolve_config([path]))
    fields = models.model_fields(cfg['model'])   # the tiny shape where the model has the key: train.py refuses the rest
    shape = [f'--{k}={cfg[k]}' for k in bench.TINY_SHAPE if k in fields or k in ('vocab_size', 'block_size', 'batch_size')]
    compile_ = torch.compile
    monkeypatch.setattr(torch, 'compile', lambda m, **kw: compile_(m, backend=backend, **kw))
    stats = bench.compile_stats()
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        train_script().main([path, *shape, f'--data_dir={data_dir}', '--dataset=tiny', f'--out_dir={out_dir}', '--device=cpu',
                    '--dtype=float32', '--compile=True', f'--max_iters={iters}', f'--eval_interval={iters // 2}',
                    '--eval_iters=1', '--log_interval=1', '--gradient_accumulation_steps=1', '--p_synth=0.0',
                    '--init_from=scratch', '--warmup_iters=0', '--micro_batch_size=None'])
    out = stats()
    torch._dynamo.reset()
    losses = [r['loss'] for r in read_log(out_dir)] + [r['val_loss'] for r in read_log(out_dir, 'eval')]
    assert len(losses) == iters + 3 and all(math.isfinite(v) for v in losses), losses
    return out, cfg


def check_bounded(stats, cfg):
    """One graph per grad mode (training, no-grad eval) where the model has no data-dependent
    Python: GPT, Mamba2, the workspace, TextNCA, FON without holes. By design more: TextNCA one
    per Ts drawn; Parcae the prelude and the coda per grad mode and its recurrent block per (grad
    mode, whether the state needs grad, prefix size 1 or more); FON with holes one more, for
    training batches without holes (train.py passes none), and no break. In every case no
    function compiles more than 6 versions, with room below the limit."""
    model = cfg['model']
    assert stats['max_versions'] <= LIMIT - 2, stats
    if model == 'parcae':
        assert stats['graphs'] <= 2 + 2 + 2 * 3, stats
    elif model == 'textnca' and cfg.get('stochastic_Ts'):
        assert stats['graphs'] <= len(cfg['stochastic_Ts']) + 1, stats
    elif model == 'fon' and cfg['p_fill'] > 0:
        assert stats['graphs'] <= 3 and stats['graph_breaks'] == 0, stats
    else:
        assert stats['graphs'] == 2 and stats['graph_breaks'] == 0, stats


@pytest.mark.parametrize('name', FAST)
def test_graphs_bounded(name, char_data, tmp_path, monkeypatch):
    stats, cfg = compiled_run(os.path.join(ROOT, 'config', f'{name}.py'), char_data, tmp_path / 'out', 'eager', monkeypatch)
    check_bounded(stats, cfg)


def test_parcae_prefix_sizes_share_one_graph(char_data, tmp_path, monkeypatch):
    # many steps of per-sequence depths: the running prefix takes most sizes in 1..batch, and
    # still no function compiles more than its design allows
    stats, cfg = compiled_run(os.path.join(ROOT, 'config', 'cpu_parcae.py'), char_data, tmp_path / 'out', 'eager',
                              monkeypatch, iters=16)
    check_bounded(stats, cfg)


@pytest.mark.slow
@pytest.mark.parametrize('path', sorted(p for p in glob.glob(os.path.join(ROOT, 'config', '**', '*.py'), recursive=True)
                                        if os.sep + 'recipe' + os.sep not in p),   # recipes are no runs
                         ids=lambda p: os.path.relpath(p, os.path.join(ROOT, 'config')))
def test_every_shipped_config_graphs_bounded(path, char_data, tmp_path, monkeypatch):
    stats, cfg = compiled_run(path, char_data, tmp_path / 'out', 'eager', monkeypatch)
    check_bounded(stats, cfg)


@pytest.mark.slow
@pytest.mark.parametrize('name', ['cpu_shakespeare_char', 'cpu_parcae', 'cpu_textnca', 'cpu_fon', 'fon_mamba2_d256',
                                  'cpu_workspace'])
def test_inductor_graphs_bounded(name, char_data, tmp_path, monkeypatch):
    # the real compiler (30-180 s a model on a CPU): the same bounds
    stats, cfg = compiled_run(os.path.join(ROOT, 'config', f'{name}.py'), char_data, tmp_path / 'out', 'inductor',
                              monkeypatch)
    check_bounded(stats, cfg)
