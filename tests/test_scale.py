"""Scale: a micro-batch apart from the batch, exact resume at another world size (Parcae's seeded
draws), activation checkpointing, DDP with compile, and every shipped config's fit on 80 GB."""
import glob
import os

import pytest
import torch

import configurator
import models
import run_folder
from conftest import CHECKOUT, read_log, run_script, train_script

TINY = ['--dataset=tiny', '--n_embd=32', '--block_size=32', '--batch_size=8', '--eval_iters=2',
        '--compile=False', '--max_iters=4', '--lr_decay_iters=4', '--eval_interval=2', '--warmup_iters=0']
DDP = ('torch.distributed.run', '--standalone')
# Two runs that see the same sequences differ only in the order their gradients are summed (over
# micro-steps, over ranks): float32 rounding, ~1e-7 relative per sum, which four AdamW steps at
# lr 1e-3 carry into the eval loss far below 1e-4; another seed (other batches) moves it by > 1e-3.
TOL = 1e-4


def val(out):
    return {e['iter']: e['val_loss'] for e in read_log(out, 'eval')}


def test_micro_batch_size_keeps_the_iteration_and_bad_values_get_one_line(char_data, tmp_path):
    a, b, c = tmp_path / 'a', tmp_path / 'b', tmp_path / 'c'
    common = [f'--data_dir={char_data}', *TINY, '--n_layer=2', '--n_head=2']
    run_script('train.py', f'--out_dir={a}', *common)
    p = run_script('train.py', f'--out_dir={b}', *common, '--micro_batch_size=2')
    assert '(1 x 4 x 2 x 32)' in p.stdout     # world x micro-steps x micro-batch x block
    run_script('train.py', f'--out_dir={c}', *common, '--seed=7')
    assert abs(val(b)[4] - val(a)[4]) < TOL and abs(val(c)[4] - val(a)[4]) > 10 * TOL, (val(a), val(b), val(c))
    for bad in ('3', '0'):
        p = run_script('train.py', f'--out_dir={tmp_path / "x"}', *common, f'--micro_batch_size={bad}', check=False)
        assert p.returncode == 2 and p.stderr.count('\n') == 1 and 'micro_batch_size must' in p.stderr, p.stderr
        assert '1, 2, 4, 8' in p.stderr


def test_parcae_resumes_exactly_at_another_world_size(char_data, tmp_path):
    # Parcae draws each sequence's depth and h_0 from its seed (seed, iteration, index): one process
    # for 4 iterations, or 2 processes for 2 then 4 processes for 2 (micro-batches 8, 4, 2), log the
    # same eval; what seeds from each rank's generator did is what another seed's run logs
    common = [f'--data_dir={char_data}', *TINY, '--model=parcae', '--n_head=2', '--mean_recurrence=3', '--mean_backprop_depth=2']
    a, b, c = tmp_path / 'a', tmp_path / 'b', tmp_path / 'c'
    run_script('train.py', f'--out_dir={a}', *common)
    run_script(*DDP, '--nproc_per_node=2', 'train.py', f'--out_dir={b}', *common, '--max_iters=2', module=True, timeout=300)
    run_script(*DDP, '--nproc_per_node=4', 'train.py', f'--out_dir={b}', *common, '--init_from=resume', module=True,
               timeout=300)
    run_script('train.py', f'--out_dir={c}', *common, '--seed=7')
    assert abs(val(b)[2] - val(a)[2]) < TOL and abs(val(b)[4] - val(a)[4]) < TOL, (val(a), val(b))
    assert abs(val(c)[4] - val(a)[4]) > 10 * TOL, (val(a), val(c))


def test_a_draw_per_micro_batch_resumes_at_another_world_size_only_where_the_micro_batch_stays(tmp_path):
    # trained by 2 processes, resumed by 4: a per-sequence draw continues whatever the micro-batch, a
    # per-batch one (depth_sampling='per_batch') only at the micro-batch it drew for; dropout never
    T = train_script()
    cfg = {**T.DEFAULTS, 'model': 'parcae', 'out_dir': str(tmp_path), 'vocab_size': 13, **TINY_MODELS['parcae']}
    xy = (torch.zeros(1, 8, dtype=torch.long), torch.zeros(1, 8, dtype=torch.long))
    given = configurator.Settings(argv=[f'--out_dir={tmp_path}', '--init_from=resume'])
    two = {'rng': [None, None]}
    run_folder.check_world(cfg, given, two, models.build_model('parcae', cfg), xy, 4, (4, 2))
    per_batch = models.build_model('parcae', {**cfg, 'depth_sampling': 'per_batch'})
    run_folder.check_world(cfg, given, two, per_batch, xy, 4, (4, 4))
    with pytest.raises(configurator.ConfigError, match='per micro-batch, and the micro-batch would be 2 sequences, not 4, so they would change; '
                                                       'resume it as it ran: torchrun --standalone --nproc_per_node=2'):
        run_folder.check_world(cfg, given, two, per_batch, xy, 4, (4, 2))
    gpt = {**cfg, 'model': 'gpt', 'n_layer': 1, 'n_embd': 16, 'dropout': 0.1}
    with pytest.raises(configurator.ConfigError, match=r'\(dropout\) from each process'):
        run_folder.check_world(gpt, given, two, models.build_model('gpt', gpt), xy, 4, (4, 4))


TINY_MODELS = {
    'gpt': dict(n_layer=2, n_head=2, n_embd=32),
    'parcae': dict(n_embd=32, n_head=2, head_dim=16, n_prelude=1, n_recur_layers=1, n_coda=1, mean_recurrence=3,
                   mean_backprop_depth=2),
    'workspace': dict(n_embd=32, n_head=2, d_ff=64, slot_dim=8, n_slots=2, n_rounds=3),
    'mamba2': dict(n_layer=2, n_embd=32, d_state=8, headdim=8, chunk_size=8),
}


@pytest.mark.parametrize('name', sorted(TINY_MODELS))
def test_grad_checkpoint_gives_the_same_gradients(name):
    # recomputation runs the same ops on the same inputs in backward: the gradients are the same bits
    cfg = {'vocab_size': 40, 'block_size': 16, **TINY_MODELS[name]}
    x = torch.randint(0, 40, (3, 16), generator=torch.Generator().manual_seed(0))
    grads = []
    for ckpt in (False, True):
        torch.manual_seed(0)
        m = models.build_model(name, {**cfg, 'grad_checkpoint': ckpt})
        m.train()
        kw = {'seeds': torch.tensor([1, 2, 3])} if models.seeded_draws(m) else {}
        m(x, x, **kw)[1].backward()
        grads.append([p.grad for p in m.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) > 0
    assert all(torch.equal(g0, g1) for g0, g1 in zip(*grads))


def test_the_dry_runs_estimate_follows_grad_checkpoint():
    # a checkpointed block keeps its input for backward (one B x T x d tensor), not the dozen its
    # attention and MLP keep: what the forward keeps falls by far more than half at a small vocabulary
    import train
    cfg = {**train.DEFAULTS, 'vocab_size': 64, 'n_layer': 4, 'n_embd': 128, 'n_head': 4, 'block_size': 256}
    plain, ckpt = (models.estimate_memory({**cfg, 'grad_checkpoint': c}, 4, 1, train.configure_optimizers) for c in (False, True))
    assert ckpt['saved'] < 0.5 * plain['saved'] and ckpt['total'] < plain['total'], (plain, ckpt)
    assert models.RECOMPUTE[0] is models.nullcontext     # the estimate's casts end with it


def test_grad_checkpoint_is_refused_where_a_model_has_no_blocks():
    with pytest.raises(models.ConfigError, match='grad_checkpoint=True: the fon model'):
        models.build_model('fon', {'vocab_size': 40, 'block_size': 16, 'n_layer': 1, 'n_embd': 32, 'grad_checkpoint': True})


@pytest.mark.slow   # inductor on a CPU, two ranks, two models: minutes
@pytest.mark.parametrize('model', ['parcae', 'fon'])
def test_ddp_with_compile_two_gloo_ranks(char_data, tmp_path, model):
    extra = ['--n_head=2', '--mean_recurrence=2', '--mean_backprop_depth=1'] if model == 'parcae' else ['--n_layer=1', '--p_fill=0.5']
    out = tmp_path / model
    p = run_script(*DDP, '--nproc_per_node=2', 'train.py', f'--data_dir={char_data}', f'--out_dir={out}', *TINY,
                   '--compile=True', f'--model={model}', '--max_iters=2', *extra, module=True, timeout=600)
    assert 'compile True, world 2' in p.stdout
    assert [e['iter'] for e in read_log(out, 'eval')] == [0, 2]


@pytest.mark.slow   # every config's step on the meta device: minutes
def test_every_shipped_config_fits_80gb_under_torchrun_at_world_8(tmp_path):
    # the GPU configs as 8 ranks of torchrun see them (DDP's buckets counted); the cpu_* ones are
    # one-process recipes (their batch does not split over 8), checked at world 1
    for path in sorted(glob.glob(os.path.join(CHECKOUT, 'config', '*.py'))):
        name = os.path.basename(path)
        cpu = name.startswith('cpu_')
        args = ['--vocab_size=66'] if cpu else []
        p = run_script('train.py', f'config/{name}', '--dry_run=True', f'--data_dir={tmp_path}', *args,
                       env={'WORLD_SIZE': '1' if cpu else '8'})
        assert 'fits on a 40 GB / 80 GB GPU:' in p.stdout and p.stdout.split('fits on a 40 GB / 80 GB GPU:')[1].split()[2] == 'yes', \
            (name, p.stdout[-1500:])
