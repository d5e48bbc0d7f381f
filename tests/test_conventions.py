"""What a nanoGPT user's hands expect: threads from the cores idle now, nanoGPT's data folders,
sample.py on the run's device, wandb_log, the batch split at 16 and 64 processes, and the next
batch read while the step runs."""
import glob
import json
import os
import pickle
import shutil
import sys

import numpy as np
import pytest
import torch

import configurator
import data
import models
import prepare_data
from conftest import ROOT, get_batch, read_log, train_script

TINY = ['--n_layer=2', '--n_head=2', '--n_embd=32', '--block_size=32', '--batch_size=8', '--eval_iters=2',
        '--log_interval=1', '--compile=False']


# ----------------------------------------------------------------------------- threads
def proc_stat(busy, idle):
    """/proc/stat with cumulative ticks per core: busy[c] user ticks, idle[c] idle ticks."""
    rows = [f"cpu{c} {busy[c]} 0 0 {idle[c]} 0 0 0 0 0 0" for c in range(len(busy))]
    return '\n'.join([f"cpu  {sum(busy)} 0 0 {sum(idle)} 0 0 0 0 0 0", *rows, 'procs_running 2'])


def reader(*texts):
    texts = iter(texts)
    return lambda: next(texts)


@pytest.fixture
def four_cores(monkeypatch):
    """A 4-core machine (of 8 in /proc/stat) where torch would take all 4; returns the threads set."""
    monkeypatch.delenv('OMP_NUM_THREADS', raising=False)
    monkeypatch.delenv('LOCAL_WORLD_SIZE', raising=False)
    monkeypatch.setattr(os, 'sched_getaffinity', lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(os, 'getloadavg', lambda: (4.0, 4.0, 4.0))   # a job that just ended still counts here
    monkeypatch.setattr(torch, 'get_num_threads', lambda: 4)
    chosen = []
    monkeypatch.setattr(torch, 'set_num_threads', chosen.append)
    return chosen


@pytest.mark.parametrize('busy_cores,threads', [((), 4), ((0,), 3), ((0, 1, 2), 1), ((0, 1, 2, 3), 1)])
def test_threads_are_the_cores_idle_now(four_cores, busy_cores, threads):
    # 20 ticks per core between the two reads: a busy core spent 18 of them running, an idle one 19
    # idle; cores 4-7 are not this process's and are busy
    before = proc_stat([100] * 8, [500] * 8)
    run = [18 if c in busy_cores or c >= 4 else 1 for c in range(8)]
    after = proc_stat([100 + r for r in run], [500 + 20 - r for r in run])
    line = models.cpu_threads(reader(before, after), wait=0)
    assert four_cores == [threads], line
    assert f"{threads} CPU thread(s) of 4 cores" in line


def test_threads_share_idle_cores_among_torchrun_ranks_and_yield_to_omp(four_cores, monkeypatch):
    idle = (proc_stat([0] * 4, [0] * 4), proc_stat([0] * 4, [20] * 4))
    monkeypatch.setenv('LOCAL_WORLD_SIZE', '2')
    models.cpu_threads(reader(*idle), wait=0)
    assert four_cores == [2]
    monkeypatch.setenv('OMP_NUM_THREADS', '3')
    assert models.cpu_threads(reader(*idle), wait=0) is None and four_cores == [2]
    monkeypatch.delenv('OMP_NUM_THREADS')

    def no_proc():
        raise FileNotFoundError('/proc/stat')
    monkeypatch.setenv('LOCAL_WORLD_SIZE', '1')
    models.cpu_threads(no_proc, wait=0)   # no /proc (macOS): what the load average leaves, at least one
    assert four_cores == [2, 1]


# ----------------------------------------------------------------------------- nanoGPT's data folders
CHARS = sorted(set('the cat sat on a mat.\n'))


def nanogpt_char_folder(root, name='ng_char', with_itos=True):
    """nanoGPT's shakespeare_char layout: {train,val}.bin and a pickled meta (itos id -> char)."""
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    text = 'the cat sat on a mat.\n' * 400
    ids = np.array([CHARS.index(c) for c in text], dtype=np.uint16)
    ids[:8000].tofile(os.path.join(d, 'train.bin'))
    ids[8000:].tofile(os.path.join(d, 'val.bin'))
    meta = {'vocab_size': len(CHARS), 'itos': dict(enumerate(CHARS)), 'stoi': {c: i for i, c in enumerate(CHARS)}}
    if not with_itos:
        del meta['itos']
    with open(os.path.join(d, 'meta.pkl'), 'wb') as f:
        pickle.dump(meta, f)
    return d


def nanogpt_bpe_folder(root, name='ng_bpe'):
    """nanoGPT's GPT-2 BPE layout (openwebtext, shakespeare): {train,val}.bin and no meta file."""
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    ids = np.random.default_rng(0).integers(0, 50257, 4000).astype(np.uint16)
    ids[:3000].tofile(os.path.join(d, 'train.bin'))
    ids[3000:].tofile(os.path.join(d, 'val.bin'))
    return d


def test_read_meta_reads_both_nanogpt_layouts(tmp_path):
    nanogpt_char_folder(tmp_path)
    nanogpt_bpe_folder(tmp_path)
    meta = data.read_meta({'data_dir': str(tmp_path), 'dataset': 'ng_char'})
    assert meta['tokenizer'] == 'char' and meta['vocab_size'] == len(CHARS) and meta['itos'] == CHARS
    assert "meta.pkl" in meta['layout']
    # only a stoi (itos is its inverse)
    nanogpt_char_folder(tmp_path, 'ng_stoi', with_itos=False)
    assert data.read_meta({'data_dir': str(tmp_path), 'dataset': 'ng_stoi'})['itos'] == CHARS
    meta = data.read_meta({'data_dir': str(tmp_path), 'dataset': 'ng_bpe'})
    assert meta['tokenizer'] == 'gpt2' and meta['vocab_size'] == 50304 and 'no meta file' in meta['layout']
    assert data.read_meta({'data_dir': str(tmp_path), 'dataset': 'nothing'}) is None


def test_a_meta_pkl_that_names_a_class_is_refused_unloaded(tmp_path):
    d = nanogpt_char_folder(tmp_path)
    with open(os.path.join(d, 'meta.pkl'), 'wb') as f:
        pickle.dump({'vocab_size': 3, 'itos': shutil.rmtree}, f)     # loading it would import and call nothing
    with pytest.raises(configurator.ConfigError, match=r"is not nanoGPT's meta.pkl.*shutil.rmtree"):
        data.read_meta({'data_dir': str(tmp_path), 'dataset': 'ng_char'})


def test_train_and_sample_on_nanogpt_char_folder(tmp_path, capsys):
    nanogpt_char_folder(tmp_path / 'data')
    out = tmp_path / 'out'
    train_script().main([f'--data_dir={tmp_path}/data', '--dataset=ng_char', f'--out_dir={out}', *TINY,
                         '--max_iters=2', '--eval_interval=2'])
    assert f"data {tmp_path}/data/ng_char: nanoGPT's meta.pkl: a char vocabulary of {len(CHARS)}" in capsys.readouterr().out
    import sample
    sample.main([f'--out_dir={out}', '--start=the cat', '--max_new_tokens=30', '--num_samples=2'])
    samples = [s.strip('\n') for s in capsys.readouterr().out.split('---------------') if s.strip()]
    assert len(samples) == 2 and all(s.startswith('the cat') and len(s) == 7 + 30 for s in samples)
    assert all(set(s) <= set(CHARS) for s in samples)


def test_train_on_nanogpt_bpe_folder_and_sample_decodes_gpt2(tmp_path, monkeypatch, capsys):
    nanogpt_bpe_folder(tmp_path / 'data')
    out = tmp_path / 'out'
    T = train_script()
    T.main([f'--data_dir={tmp_path}/data', '--dataset=ng_bpe', f'--out_dir={out}', *TINY, '--n_embd=16',
            '--max_iters=1', '--eval_interval=1', '--eval_iters=1'])
    assert "nanoGPT's, no meta file: the GPT-2 tokenizer, vocab 50304" in capsys.readouterr().out
    ckpt = torch.load(out / 'ckpt.pt', weights_only=False)
    assert ckpt['model_args']['vocab_size'] == 50304 and ckpt['meta']['tokenizer'] == 'gpt2'
    # the GPT-2 BPE files are not here (tests never download): a small BPE with GPT-2's rules stands in
    import sample
    import tiktoken
    from tiktoken_ext.openai_public import r50k_pat_str
    ranks = {bytes([i]): i for i in range(256)}
    ranks.update({b'th': 256, b'the': 257, b' c': 258})
    enc = tiktoken.Encoding(name='small', pat_str=r50k_pat_str, mergeable_ranks=ranks,
                            special_tokens={'<|endoftext|>': 259})
    monkeypatch.setattr(prepare_data, '_base_gpt2', lambda: enc)
    sample.main([f'--out_dir={out}', '--start=the cat', '--max_new_tokens=5', '--temperature=0'])
    assert capsys.readouterr().out.startswith('the cat')


def test_a_char_meta_without_itos_is_one_line(char_data, tmp_path, capsys, monkeypatch):
    # its dataset (tools.eval --stream=True) and a checkpoint that carries it (sample.py)
    data = tmp_path / 'data'
    shutil.copytree(os.path.join(char_data, 'tiny'), data / 'tiny')
    out = tmp_path / 'out'
    T = train_script()
    T.main([f'--data_dir={data}', '--dataset=tiny', f'--out_dir={out}', *TINY, '--max_iters=1', '--eval_interval=1'])
    meta = json.load(open(data / 'tiny' / 'meta.json'))
    del meta['itos']
    json.dump(meta, open(data / 'tiny' / 'meta.json', 'w'))
    capsys.readouterr()
    import tools.eval
    with pytest.raises(SystemExit) as e:
        tools.eval.main([f'--out_dir={out}', '--stream=True'])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count('\n') == 1 and 'meta.json has no itos' in err, err
    ckpt = torch.load(out / 'ckpt.pt', weights_only=False)
    del ckpt['meta']['itos']
    torch.save(ckpt, out / 'ckpt.pt')
    import sample
    with pytest.raises(SystemExit) as e:
        sample.main([f'--out_dir={out}'])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count('\n') == 1 and 'cannot decode: its meta has no itos' in err, err


# ----------------------------------------------------------------------------- sample.py's device and dtype
@pytest.fixture
def machine(monkeypatch):
    """Sets which accelerators this machine has: machine(cuda=..., mps=..., bf16=...)."""
    def have(cuda=False, mps=False, bf16=True):
        monkeypatch.setattr(torch.cuda, 'is_available', lambda: cuda)
        monkeypatch.setattr(torch.cuda, 'device_count', lambda: int(cuda))
        monkeypatch.setattr(torch.cuda, 'is_bf16_supported', lambda *a, **k: bf16)
        monkeypatch.setattr(torch.backends.mps, 'is_available', lambda: mps)
    return have


def test_sample_defaults_resolve_to_the_runs_device_else_the_best_here(machine):
    import models
    import sample
    assert (sample.DEFAULTS['device'], sample.DEFAULTS['dtype'], sample.DEFAULTS['compile']) == (None, 'auto', False)
    machine()       # this CPU machine
    assert sample.sample_device(None, 'cpu') == ('cpu', None)
    assert sample.sample_device(None, 'auto') == ('cpu', None)
    dev, note = sample.sample_device(None, 'cuda:1')
    assert dev == 'cpu' and note == "note: the run trained on cuda:1, which this machine lacks: sampling on cpu"
    assert models.resolve_device('cpu', 'auto')[1] == torch.float32
    machine(mps=True)
    assert sample.sample_device(None, 'cuda')[0] == sample.sample_device('auto', 'cpu')[0] == 'mps'
    assert sample.sample_device(None, 'cpu') == ('cpu', None)      # the run's own device where it is here
    machine(cuda=True, mps=True)
    assert sample.sample_device(None, 'auto') == ('cuda', None) and sample.sample_device(None, 'mps') == ('mps', None)
    assert models.resolve_device('cuda', 'auto')[1] == torch.bfloat16
    machine(cuda=True, bf16=False)
    assert models.resolve_device('cuda', 'auto')[1] == torch.float32


def test_cuda_runs_turn_cudnn_attention_off(machine):
    # cuDNN's SDPA plans per shape: Parcae's shrinking batches and decoding's growing keys paid
    # milliseconds of host time per call on an H200 (models.resolve_device)
    import models
    was = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        machine()
        models.resolve_device('cpu', 'auto')
        assert torch.backends.cuda.cudnn_sdp_enabled()
        machine(cuda=True)
        models.resolve_device('cuda', 'auto')
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)


def test_a_checkpoint_that_says_cuda_samples_on_the_cpu_with_a_line(char_data, tmp_path, machine, capsys):
    out = tmp_path / 'out'
    train_script().main([f'--data_dir={char_data}', '--dataset=tiny', f'--out_dir={out}', *TINY, '--max_iters=1',
                         '--eval_interval=1'])
    ckpt = torch.load(out / 'ckpt.pt', weights_only=False)
    ckpt['config']['device'] = 'cuda'
    torch.save(ckpt, out / 'ckpt.pt')
    capsys.readouterr()
    machine()
    import sample
    sample.main([f'--out_dir={out}', '--start=the', '--max_new_tokens=4'])
    got = capsys.readouterr()
    assert got.err == "note: the run trained on cuda, which this machine lacks: sampling on cpu\n"
    assert got.out.startswith('the')
    with pytest.raises(SystemExit):
        sample.main([f'--out_dir={out}', '--dtype=half'])
    assert 'dtype must be auto, float32, bfloat16 or float16' in capsys.readouterr().err


# ----------------------------------------------------------------------------- wandb
def fake_wandb(root):
    """A stand-in wandb package that records its calls."""
    (root / 'wandb').mkdir()
    (root / 'wandb' / '__init__.py').write_text(
        "calls = []\n"
        "def init(**kw):\n    calls.append(('init', kw))\n"
        "def log(data, step=None):\n    calls.append(('log', dict(data), step))\n")


def test_wandb_logs_what_log_jsonl_holds(char_data, tmp_path, monkeypatch):
    fake_wandb(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, 'wandb', None)     # so that the stand-in goes when the test ends
    monkeypatch.delitem(sys.modules, 'wandb')
    out = tmp_path / 'run_a'
    train_script().main([f'--data_dir={char_data}', '--dataset=tiny', f'--out_dir={out}', *TINY, '--max_iters=4',
                         '--eval_interval=2', '--wandb_log=True'])
    import wandb
    (kind, init), *logs = wandb.calls
    assert kind == 'init' and init['project'] == 'looped-lm' and init['name'] == 'run_a'
    assert init['config']['max_iters'] == 4 and init['config']['wandb_log'] is True
    recs = [json.loads(line) for line in open(out / 'log.jsonl')]
    assert len(recs) == 4 + 3
    assert logs == [('log', {k: v for k, v in r.items() if k != 'kind'}, r['iter']) for r in recs]
    # logging is how a run runs, not what it trains: a resumed run may turn it on or off
    wandb.calls.clear()
    train_script().main([f'--data_dir={char_data}', '--dataset=tiny', f'--out_dir={out}', *TINY, '--max_iters=5',
                         '--eval_interval=2', '--init_from=resume', '--wandb_log=True', '--wandb_run_name=again'])
    assert wandb.calls[0][1]['name'] == 'again' and [c[2] for c in wandb.calls[1:]] == [4, 4, 5]


def test_wandb_not_installed_is_one_line_before_anything(char_data, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, 'wandb', None)     # import wandb raises ImportError
    with pytest.raises(SystemExit) as e:
        train_script().main([f'--data_dir={char_data}', '--dataset=tiny', f'--out_dir={tmp_path}/o', *TINY,
                             '--wandb_log=True'])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count('\n') == 1
    assert err.startswith('error: wandb_log=True needs the wandb package, which is not installed: pip install wandb')
    assert not os.path.exists(tmp_path / 'o')


# ----------------------------------------------------------------------------- many machines
def recipes():
    """(batch_size, gradient_accumulation_steps) of every config, and nanoGPT's GPT-2 recipe (12 x 40)."""
    pairs, defaults = {(12, 40)}, train_script().DEFAULTS
    for f in glob.glob(os.path.join(ROOT, 'config', '**', '*.py'), recursive=True):
        cfg = {**defaults, **configurator.parse_args([f])}
        pairs.add((cfg['batch_size'], cfg['gradient_accumulation_steps']))
    return sorted(pairs)


@pytest.mark.parametrize('world', [16, 64])
def test_batch_split_at_16_and_64_processes(world):
    import re
    for B, A in recipes():
        cfg = {'batch_size': B, 'gradient_accumulation_steps': A}
        split = data.split_batch(cfg, world)
        if split is None:
            # it does not divide, and both values the hint proposes do
            assert (B * A) % world
            hint = train_script().split_hint(cfg, world, configurator.Settings())
            a2, b2 = map(int, re.search(r'--gradient_accumulation_steps=(\d+) .* --batch_size=(\d+)', hint).groups())
            assert data.split_batch({**cfg, 'gradient_accumulation_steps': a2}, world)
            assert data.split_batch({**cfg, 'batch_size': b2}, world)
            continue
        micro, accum = split
        # the iteration holds the same sequences as on one process, each micro-batch at most batch_size,
        # and the largest that divides a process's share
        assert world * micro * accum == B * A and micro <= B
        assert not any((B * A // world) % b == 0 for b in range(micro + 1, B + 1))


@pytest.mark.parametrize('world', [16, 64])
def test_blocks_of_an_iteration_are_the_next_of_the_shuffle_at_16_and_64(tmp_path, world):
    # the workspace paper's sampler: iteration it reads blocks it*S .. (it+1)*S - 1 of the pass's
    # shuffle (S sequences per iteration) over all ranks, whatever the world size, so a run resumed
    # at iteration it, on any number of processes, reads on where it stopped
    T, S, n_blocks = 1, 128, 1024
    d = tmp_path / 'blk'
    d.mkdir()
    np.repeat(np.arange(n_blocks, dtype=np.uint16), T + 1).tofile(d / 'train.bin')   # block b holds b, b
    cfg = {'data_dir': str(tmp_path), 'dataset': 'blk', 'sampler': 'blocks', 'block_size': T, 'batch_size': 8,
           'gradient_accumulation_steps': S // 8}
    micro, accum = data.split_batch(cfg, world)
    order = data.block_order(1337, 0, n_blocks).tolist()
    for it in (0, 3):
        got = [b for rank in range(world) for m in range(accum)
               for b in get_batch(cfg, 'train', it, m, rank=rank, world=world)[0][:, 0].tolist()]
        assert len(got) == S and sorted(got) == sorted(order[it * S:(it + 1) * S])


# ----------------------------------------------------------------------------- the next batch, read while the step runs
def spied_run(T, monkeypatch, args, lazy=False):
    """Runs train.py in this process; returns the events (fetch, forward, backward) of its training
    steps, and each step's input. lazy: every batch is read only where the step uses it (no prefetch)."""
    events, inputs = [], []
    fetch, build = T.train.__globals__['get_batch'], T.train.__globals__['build_model']

    class Later:
        def __init__(self, *a):
            self.a = a

        def __iter__(self):
            return iter(fetch(*self.a))

    def get_batch(split, it, micro, *a):
        if split != 'train' or it < 0:   # an eval batch
            return fetch(split, it, micro, *a)
        events.append(('fetch', it, micro))
        return Later(split, it, micro, *a) if lazy else fetch(split, it, micro, *a)

    def tracked(name, cfg):
        m = build(name, cfg)
        forward = m.forward

        def spy(idx, targets=None):
            logits, loss = forward(idx, targets)
            if m.training:
                events.append('forward')
                inputs.append(idx.clone())
                loss.register_hook(lambda g: events.append('backward'))
            return logits, loss
        m.forward = spy
        return m
    monkeypatch.setitem(T.train.__globals__, 'get_batch', get_batch)
    monkeypatch.setitem(T.train.__globals__, 'build_model', tracked)
    T.main(args)
    return events, inputs


def test_the_next_batch_is_read_while_the_step_runs_and_changes_no_loss(char_data, tmp_path, monkeypatch):
    T = train_script()
    pinned = []
    monkeypatch.setattr(torch.Tensor, 'pin_memory', lambda t, *a: pinned.append(t) or t)
    common = [f'--data_dir={char_data}', '--dataset=tiny', *TINY, '--max_iters=3', '--eval_interval=3',
              '--gradient_accumulation_steps=2', '--dropout=0.1']
    events, inputs = spied_run(T, monkeypatch, [*common, f'--out_dir={tmp_path}/pre'])
    # micro-step k+1's batch (the next iteration's first after the last) is read between step k's
    # forward and its backward; the last step reads none
    steps = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    want = [('fetch', 0, 0)]
    for nxt in steps[1:] + [None]:
        want += ['forward'] + ([('fetch', *nxt)] if nxt else []) + ['backward']
    assert events == want
    cfg = {'data_dir': char_data, 'dataset': 'tiny', 'block_size': 32, 'batch_size': 8, 'gradient_accumulation_steps': 2}
    assert all(torch.equal(x, get_batch(cfg, 'train', it, m)[0]) for x, (it, m) in zip(inputs, steps))
    spied_run(T, monkeypatch, [*common, f'--out_dir={tmp_path}/lazy'], lazy=True)
    for kind, keys in (('train', ('iter', 'loss', 'grad_norm')), ('eval', ('iter', 'train_loss', 'val_loss'))):
        pre, lazy = ([[r[k] for k in keys] for r in read_log(tmp_path / d, kind)] for d in ('pre', 'lazy'))
        assert pre == lazy and len(pre) == {'train': 3, 'eval': 2}[kind]
    assert pinned == []     # a CPU run pins nothing


def test_only_a_cuda_copy_is_pinned(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.Tensor, 'pin_memory', lambda t, *a: calls.append('pin') or t)
    monkeypatch.setattr(torch.Tensor, 'to', lambda t, *a, **kw: calls.append(('to', a, kw)) or t)
    t = torch.zeros(2, 3, dtype=torch.long)
    data.to_device(t, 'cuda:0')
    assert calls == ['pin', ('to', ('cuda:0',), {'non_blocking': True})]
    calls.clear()
    data.to_device(t, 'cpu')
    data.to_device(t, 'mps')
    assert calls == [('to', ('cpu',), {'non_blocking': True}), ('to', ('mps',), {'non_blocking': True})]


# ----------------------------------------------------------------------------- the checkout stays the user's
def test_tests_run_in_a_copy_of_the_checkout():
    # a script's default out_dir and data_dir ('out', 'data') fall in the session's copy, not in the checkout
    import conftest
    assert os.getcwd() == conftest.CHECKOUT != ROOT
    assert os.path.isfile(os.path.join(conftest.CHECKOUT, 'train.py'))
    assert not os.path.exists(os.path.join(conftest.CHECKOUT, 'results', 'runs'))


@pytest.mark.parametrize('where', ['out', 'data', 'tmp'])
def test_a_session_that_writes_the_checkouts_out_or_data_fails(tmp_path, where):
    # a session run on a fake checkout with this conftest: a test that writes its out/ or data/
    # fails the session, one that writes its own tmp_path passes
    import subprocess
    fake = tmp_path / 'fake'
    os.makedirs(fake / 'tests')
    shutil.copy(os.path.join(ROOT, 'tests', 'conftest.py'), fake / 'tests')
    (fake / 'train.py').write_text('')
    target = f"os.path.join(ROOT, {where!r}, 'x')" if where != 'tmp' else "str(tmp_path / 'x')"
    (fake / 'tests' / 'test_w.py').write_text(
        "import os\nfrom conftest import ROOT\n\n\ndef test_w(tmp_path):\n"
        f"    os.makedirs(os.path.dirname({target}), exist_ok=True)\n    open({target}, 'w').write('x')\n")
    p = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'tests/test_w.py'], cwd=fake,
                       capture_output=True, text=True, env={**os.environ, 'OMP_NUM_THREADS': '1'}, timeout=300)
    if where == 'tmp':
        assert p.returncode == 0, p.stdout + p.stderr
    else:
        assert p.returncode == 1 and "wrote the checkout's own out*/ or data/" in p.stdout, p.stdout + p.stderr
        assert '1 passed' in p.stdout and os.path.join(where, 'x') in p.stdout
