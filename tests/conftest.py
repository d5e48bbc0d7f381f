import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
torch.set_num_threads(1)  # tiny shapes: one thread is faster, and the suite runs on 2 cores


def pytest_configure(config):
    config.addinivalue_line('markers', 'slow: minutes on a CPU (torch.compile through inductor, every config); run with RUN_SLOW=1')


# Tests never read or write the checkout's own out*/ and data/ (a user's runs and data live there):
# every test runs in a copy of the checkout (CHECKOUT, made once per session), so a script's
# default out_dir and data_dir fall in the copy, and the session fails if the checkout's changed.
def checkout_files(root):
    """The files of the checkout at root, relative: git's tracked files and the Python files beside
    them (a new module not yet committed), never results/runs/ (run records) or a run's folder."""
    try:
        listed = subprocess.run(['git', 'ls-files'], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):   # not a git checkout: every file but the ignored kinds
        listed = [os.path.relpath(os.path.join(d, f), root) for d, dirs, files in os.walk(root) for f in files
                  if not os.path.relpath(d, root).split(os.sep)[0].startswith(('.', 'out', 'data', '__pycache__'))]
    for d in ('.', 'tools', 'tests', 'config'):
        listed += [os.path.join(d, f) if d != '.' else f for f in os.listdir(os.path.join(root, d)) if f.endswith('.py')] \
            if os.path.isdir(os.path.join(root, d)) else []
    return sorted({f for f in listed if not f.startswith(os.path.join('results', 'runs') + os.sep)
                   and os.path.isfile(os.path.join(root, f))})


def copy_checkout(dest, root=ROOT):
    """A copy of the checkout's files (checkout_files) at dest; returns dest."""
    for f in checkout_files(root):
        os.makedirs(os.path.join(dest, os.path.dirname(f)), exist_ok=True)
        shutil.copy2(os.path.join(root, f), os.path.join(dest, f))
    return str(dest)


def user_folders(root=ROOT):
    """What the checkout's out*/ and data/ hold: path -> (size, mtime) of every file and folder."""
    seen = {}
    for top in sorted(os.listdir(root)):
        if top == 'data' or top.startswith('out'):
            for d, dirs, files in os.walk(os.path.join(root, top)):
                for name in [''] + files:
                    st = os.lstat(os.path.join(d, name))
                    seen[os.path.relpath(os.path.join(d, name), root)] = (st.st_size, st.st_mtime_ns if name else None)
    return seen


CHECKOUT = None     # the session's copy, the cwd of every test and script


def pytest_sessionstart(session):
    global CHECKOUT
    import tempfile
    session.config._user_folders = user_folders()
    CHECKOUT = copy_checkout(tempfile.mkdtemp(prefix='checkout-'))
    session.config._cwd = os.getcwd()
    os.chdir(CHECKOUT)


def pytest_sessionfinish(session, exitstatus):
    os.chdir(session.config._cwd)
    shutil.rmtree(CHECKOUT, ignore_errors=True)
    before, after = session.config._user_folders, user_folders()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        session.config.get_terminal_writer().line(
            f"FAILED: a test wrote the checkout's own out*/ or data/ ({ROOT}): {', '.join(changed[:5])}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(config, items):
    if os.environ.get('RUN_SLOW') != '1':
        skip = pytest.mark.skip(reason='slow: set RUN_SLOW=1 to run it')
        for item in items:
            if 'slow' in item.keywords:
                item.add_marker(skip)


def make_char_dataset(root, name='tiny', n_chars=60_000, seed=0):
    """A small char-level corpus with structure to learn (words from a short list), written in
    train.py's format: data/<name>/{train,val}.bin + meta.json. Made here: tests never read data from outside the repo."""
    rng = np.random.default_rng(seed)
    words = ['the', 'cat', 'sat', 'on', 'a', 'mat', 'and', 'dog', 'ran', 'to', 'it', 'was', 'red']
    text = ''
    while len(text) < n_chars:
        text += ' '.join(rng.choice(words, size=8)) + '.\n'
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    ids = np.array([stoi[c] for c in text], dtype=np.uint16)
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    n = int(0.9 * len(ids))
    ids[:n].tofile(os.path.join(d, 'train.bin'))
    ids[n:].tofile(os.path.join(d, 'val.bin'))
    json.dump({'vocab_size': len(chars), 'tokenizer': 'char', 'itos': chars, 'stoi': stoi},
              open(os.path.join(d, 'meta.json'), 'w'))
    return root


@pytest.fixture(scope='session')
def char_data(tmp_path_factory):
    """data_dir holding the dataset 'tiny'."""
    return make_char_dataset(str(tmp_path_factory.mktemp('data')))


def run_script(script, *args, env=None, check=True, cwd=None, module=False, timeout=600):
    """python [-m] script args in cwd (None: the session's copy of the checkout)."""
    cmd = [sys.executable] + (['-m'] if module else []) + [script] + [str(a) for a in args]
    full_env = {**os.environ, 'OMP_NUM_THREADS': '1', **(env or {})}
    p = subprocess.run(cmd, cwd=cwd or CHECKOUT, capture_output=True, text=True, env=full_env, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def read_log(out_dir, kind='train'):
    recs = [json.loads(line) for line in open(os.path.join(out_dir, 'log.jsonl'))]
    return [r for r in recs if r['kind'] == kind]


def train_script():
    """train.py as a module (DEFAULTS, get_batch, get_lr, main, ...): importing it runs nothing."""
    import train
    return train


def get_batch(cfg, split, it, micro=0, rank=0, world=1, mask=None):
    """(x, y, holes) as train.py draws them (data.draw_batch) for this config."""
    import data
    cfg = {**train_script().DEFAULTS, **cfg}
    paths = data.data_streams(cfg)
    streams = data.open_streams({k: p for k, p in paths.items() if os.path.isfile(p)})[0]   # a test may write one split
    return data.draw_batch(split, it, micro, cfg, streams, mask, rank, world)


def pasted(text, after):
    """The command a hint printed in text after the words `after`, as argv to run here: its python
    or torchrun (python -m torch.distributed.run) and its arguments, up to the , ; or ) that ends it."""
    import shlex
    assert after in text, text
    lex = shlex.shlex(text.split(after, 1)[1], posix=True, punctuation_chars=',;)')
    lex.whitespace_split = True
    words = list(lex)
    start = next(i for i, w in enumerate(words) if w in ('python', 'torchrun'))
    script = next(i for i in range(start, len(words)) if words[i].endswith('.py'))
    end = script + 1
    while end < len(words) and (words[end].startswith('--') or words[end].endswith('.py')):
        end += 1
    launch = [sys.executable] if words[start] == 'python' else [sys.executable, '-m', 'torch.distributed.run']
    return launch + words[start + 1:end]


def run_pasted(text, after, timeout=600, **kw):
    """Runs the command a hint printed (pasted), as run_script runs a script."""
    cmd = pasted(text, after)
    return run_script(cmd[1] if cmd[1] != '-m' else cmd[2], *cmd[2 if cmd[1] != '-m' else 3:],
                      module=cmd[1] == '-m', timeout=timeout, **kw)
