"""parallel='fsdp': two gloo ranks of FSDP log the losses DDP logs, write the checkpoint DDP writes
(or, sharded_checkpoint=True, their shards), resume exactly under FSDP, at one process and at another
world size; what FSDP refuses; the dry run's share per GPU."""
import os
import re
import shutil

import pytest
import torch

import run_folder
from conftest import read_log, run_script, train_script

MAX_ITERS = 4
# eval_iters=3 over 2 ranks: one rank runs a forward that counts nothing, as FSDP's all-gathers need
TINY = ['--dataset=tiny', '--n_embd=32', '--block_size=32', '--batch_size=8', '--eval_iters=3', '--compile=False',
        f'--max_iters={MAX_ITERS}', f'--lr_decay_iters={MAX_ITERS}', '--eval_interval=2', '--warmup_iters=0',
        '--log_interval=1']
GPT = ['--n_layer=2', '--n_head=2']
# FSDP sums each step's gradients in another order than DDP (a reduce-scatter per block, not an
# all-reduce per bucket), and one process in another order again: float32 rounding, a few ulp of
# each gradient, which AdamW passes on to its update about as it is. So each step moves the loss
# by a few ulp of its scale, and the steps add up: 4 ulp a step of a loss below 4 (2**-22 there).
TOL = 4 * 2 ** -22 * MAX_ITERS


def torchrun(n, out, *args):
    return run_script('torch.distributed.run', '--standalone', f'--nproc_per_node={n}', 'train.py', f'--out_dir={out}',
                      *args, module=True, timeout=300)


def losses(out, kind):
    key = 'loss' if kind == 'train' else 'val_loss'
    return {r['iter']: r[key] for r in read_log(out, kind)}


def assert_close(a, b, kind='eval'):
    x, y = losses(a, kind), losses(b, kind)
    assert x.keys() == y.keys() and all(abs(x[i] - y[i]) <= TOL for i in x), (kind, x, y)


@pytest.fixture(scope='module')
def ddp(char_data, tmp_path_factory):
    """DDP's uninterrupted run, which the FSDP runs log."""
    out = tmp_path_factory.mktemp('ddp')
    torchrun(2, out, f'--data_dir={char_data}', *TINY, *GPT)
    return out


def test_fsdp_logs_ddps_losses_writes_its_checkpoint_and_resumes_exactly_at_2_and_1_processes(char_data, ddp, tmp_path):
    fsdp, one = tmp_path / 'fsdp', tmp_path / 'one'
    common = [f'--data_dir={char_data}', *TINY, *GPT]
    p = torchrun(2, fsdp, *common, '--parallel=fsdp', '--max_iters=2')
    assert 'world 2 (FSDP)' in p.stdout
    shutil.copytree(fsdp, one)
    p = torchrun(2, fsdp, '--init_from=resume', f'--max_iters={MAX_ITERS}')
    assert 'world 2 (FSDP)' in p.stdout
    p = run_script('train.py', f'--out_dir={one}', '--init_from=resume', f'--max_iters={MAX_ITERS}')
    assert 'world 1' in p.stdout and 'FSDP' not in p.stdout     # one process: nothing to shard
    # the FSDP run, stopped at 2 and resumed, logs what DDP's uninterrupted run does at every step;
    # at one process the train loss is another micro-batch's, the eval the same
    assert_close(fsdp, ddp)
    assert_close(fsdp, ddp, 'train')
    assert_close(one, ddp)

    a, b = (torch.load(os.path.join(d, 'ckpt.pt'), weights_only=False) for d in (ddp, fsdp))
    tied = [b['model'][k].untyped_storage().data_ptr() for k in ('lm_head.weight', 'transformer.wte.weight')]
    assert a['model'].keys() == b['model'].keys() and tied[0] == tied[1]     # one tensor, as DDP's file has it
    assert all(type(t) is torch.Tensor and t.shape == a['model'][k].shape
               for k, t in b['model'].items())
    for sa, sb in zip(a['optimizers'], b['optimizers']):
        assert sa['param_groups'] == sb['param_groups'] and sa['state'].keys() == sb['state'].keys()
        assert all(type(sb['state'][i][k]) is type(t) and sb['state'][i][k].shape == t.shape
                   for i, s in sa['state'].items() for k, t in s.items())
    p = run_script('sample.py', f'--out_dir={fsdp}', '--start=the cat', '--max_new_tokens=10', '--num_samples=1')
    assert p.stdout.startswith('the cat')


def test_a_sharded_checkpoint_resumes_exactly_at_2_and_1_processes_and_reads_whole(char_data, ddp, tmp_path):
    # each rank writes its shards into a folder beside a ckpt.pt without weights; a resume at 2 loads them
    # resharded, one at 1 (and sample.py) reads them whole and saves ckpt.pt whole
    fsdp, one = tmp_path / 'fsdp', tmp_path / 'one'
    torchrun(2, fsdp, f'--data_dir={char_data}', *TINY, *GPT, '--parallel=fsdp', '--sharded_checkpoint=True',
             '--max_iters=2')
    ckpt = torch.load(os.path.join(fsdp, 'ckpt.pt'), weights_only=False)
    assert 'model' not in ckpt and run_folder.tensor_bytes(ckpt['optimizers']) == 0
    assert len(os.listdir(os.path.join(fsdp, ckpt['sharded']))) > 2     # the metadata and a file a rank
    shutil.copytree(fsdp, one)
    torchrun(2, fsdp, '--init_from=resume', f'--max_iters={MAX_ITERS}')
    p = run_script('train.py', f'--out_dir={one}', '--init_from=resume', f'--max_iters={MAX_ITERS}')
    assert 'world 1' in p.stdout
    assert_close(fsdp, ddp)
    assert_close(fsdp, ddp, 'train')
    assert_close(one, ddp)
    # the last save's shards replaced the first's; at one process ckpt.pt holds the states whole
    assert run_folder.shard_folders(fsdp) == [run_folder.read_checkpoint(str(fsdp), shards=False)['sharded']]
    assert not run_folder.shard_folders(one) and 'model' in torch.load(one / 'ckpt.pt', weights_only=False)
    # read whole, it is the dict DDP's file holds
    a, b = (run_folder.read_checkpoint(str(d)) for d in (ddp, fsdp))
    assert a.keys() == b.keys() and all(t.shape == a['model'][k].shape for k, t in b['model'].items())
    for sa, sb in zip(a['optimizers'], b['optimizers']):
        assert sa['param_groups'] == sb['param_groups'] and sa['state'].keys() == sb['state'].keys()
    p = run_script('sample.py', f'--out_dir={fsdp}', '--start=the cat', '--max_new_tokens=10', '--num_samples=1')
    assert p.stdout.startswith('the cat')


def test_a_sharded_checkpoint_without_fsdp_is_refused_in_one_line(char_data, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv('WORLD_SIZE', raising=False)
    with pytest.raises(SystemExit) as e:
        train_script().main([f'--data_dir={char_data}', f'--out_dir={tmp_path}', *TINY, *GPT, '--sharded_checkpoint=True'])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count('\n') == 1, err
    assert "sharded_checkpoint=True writes the shards of parallel='fsdp' processes under torchrun" in err, err


def test_fsdp_refuses_muon_and_float16_in_one_line(char_data, tmp_path):
    for bad, says in (('--optimizer=muon', "Muon orthogonalizes whole matrices: use optimizer='adamw'"),
                      ('--dtype=float16', "not 'float16'")):
        p = run_script('train.py', f'--data_dir={char_data}', f'--out_dir={tmp_path}', *TINY, *GPT, '--parallel=fsdp',
                       bad, check=False)
        assert p.returncode == 2 and p.stderr.count('\n') == 1 and says in p.stderr, p.stderr


def test_the_dry_run_counts_a_share_of_the_states_and_the_units_gathered_whole(tmp_path, capsys, monkeypatch):
    # weights, gradients and AdamW's two states (4 fp32 copies) shared by 8, plus the root's unit (the
    # tied embedding) and one block, each as parameters and gradients; activations as DDP has them
    monkeypatch.setenv('WORLD_SIZE', '8')
    train_script().main(['--dry_run=True', '--vocab_size=50304', '--n_layer=4', '--n_embd=256', '--n_head=4',
                         '--batch_size=8', f'--data_dir={tmp_path}', '--parallel=fsdp'])
    out = capsys.readouterr().out
    gb = {k: float(v) for k, v in re.findall(r'  (weights|gradients|activations): ([\d.]+) GB', out)}
    share, gathered, total = map(float, re.search(r'optimizer states ([\d.]+) GB \(a 1/8 share\), \+ ([\d.]+) GB '
                                                  r'gathered.* ([\d.]+) GB per GPU', out).groups())
    n_embd, vocab = 256, 50304
    assert share == pytest.approx(4 * gb['weights'] / 8, abs=0.01), out
    assert gathered == pytest.approx(2 * 4 * (vocab * n_embd + 12 * n_embd ** 2) / 2 ** 30, abs=0.01), out
    assert total == pytest.approx(share + gathered + gb['activations'], abs=0.02), out


@pytest.mark.slow   # five runs of Parcae on two and four gloo ranks: a minute
def test_parcae_under_fsdp_logs_ddps_losses_and_resumes_at_another_world_size_and_from_ddp(char_data, tmp_path):
    # Parcae loops its recurrent blocks to a depth each rank draws: they stay in the root's unit. FSDP
    # 2 ranks then 4 (the depths follow each sequence's seed), and a DDP checkpoint resumed under FSDP,
    # log what DDP does
    common = [f'--data_dir={char_data}', *TINY, '--model=parcae', '--n_head=2', '--mean_recurrence=3',
              '--mean_backprop_depth=2']
    ddp, fsdp, switched = tmp_path / 'ddp', tmp_path / 'fsdp', tmp_path / 'switched'
    torchrun(2, ddp, *common, '--max_iters=2')
    shutil.copytree(ddp, switched)
    torchrun(2, ddp, '--init_from=resume', f'--max_iters={MAX_ITERS}')
    torchrun(2, fsdp, *common, '--parallel=fsdp', '--max_iters=2')
    torchrun(4, fsdp, '--init_from=resume', f'--max_iters={MAX_ITERS}')
    p = torchrun(2, switched, '--init_from=resume', '--parallel=fsdp', f'--max_iters={MAX_ITERS}')
    assert 'world 2 (FSDP)' in p.stdout
    assert_close(fsdp, ddp)
    assert_close(switched, ddp)
    assert_close(switched, ddp, 'train')
