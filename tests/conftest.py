import json
import os
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


def run_script(script, *args, env=None, check=True, cwd=ROOT, module=False, timeout=600):
    cmd = [sys.executable] + (['-m'] if module else []) + [script] + [str(a) for a in args]
    full_env = {**os.environ, 'OMP_NUM_THREADS': '1', **(env or {})}
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=full_env, timeout=timeout)
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
    """(x, y, holes) as train.py draws them for this config."""
    T = train_script()
    paths = T.data_streams({**T.DEFAULTS, **cfg})
    streams = T.open_streams({k: p for k, p in paths.items() if os.path.isfile(p)})[0]   # a test may write one split
    return T.draw_batch(split, it, micro, {**T.DEFAULTS, **cfg}, streams, mask, rank, world)
