"""Every mistake a new user makes with train.py, sample.py and eval.py ends in one clear line.

One table of cases. Each case runs in its own process, forked from a driver that imported torch
and the three scripts once (a fresh interpreter per case would cost seconds each): the case
passes when the process exits non-zero, prints no traceback, at most three lines on stderr, and
the words that say what is wrong. Afterwards the files a refused command must not touch are
checked byte for byte.
"""
import hashlib
import json
import os
import re
import shutil
import sys

import numpy as np
import pytest
import torch

import conftest
from conftest import ROOT, make_char_dataset, pasted, run_script

TINY = ['--dataset=tiny', '--n_layer=1', '--n_head=2', '--n_embd=16', '--block_size=16', '--batch_size=4',
        '--eval_iters=1', '--compile=False', '--max_iters=0']
BARE = ['--dataset=tiny', '--block_size=16', '--batch_size=4', '--eval_iters=1', '--compile=False', '--max_iters=0']
PARCAE = ['--model=parcae', '--n_embd=64', '--n_head=2', '--head_dim=32', '--n_prelude=1', '--n_recur_layers=1',
          '--n_coda=1', '--mean_recurrence=2', '--mean_backprop_depth=1']
TEXTNCA = ['--model=textnca', '--n_embd=16', '--n_head=2', '--d_ff=32', '--windows=(4, 8)', '--Ts=2']


def cases(d):
    """(script, args, what stderr must say) for the folders made by `workspace`."""
    data, run = f"--data_dir={d}/data", f"--out_dir={d}/run"
    train = [('train.py', [data, *TINY, f'--out_dir={d}/new/{k}', *args], msg) for k, (args, msg) in enumerate([
        (['--batch_size=0'], 'batch_size must be > 0, got 0'),
        (['--batch_size=-4'], 'batch_size must be > 0, got -4'),
        (['--gradient_accumulation_steps=0'], 'gradient_accumulation_steps must be > 0'),
        (['--eval_interval=0'], 'eval_interval must be > 0'),
        (['--log_interval=-1'], 'log_interval must be > 0'),
        (['--eval_iters=0'], 'eval_iters must be > 0'),
        (['--block_size=0'], 'block_size must be > 0'),
        (['--learning_rate=-0.001'], 'learning_rate must be > 0'),
        (['--learning_rate=0'], 'learning_rate must be > 0'),
        (['--max_iters=-1'], 'max_iters must be >= 0'),
        (['--warmup_iters=-5'], 'warmup_iters must be >= 0'),
        (['--dropout=1.5'], 'dropout must be between 0 and 1'),
        (['--beta2=1.0'], 'beta2 must be in [0, 1)'),
        (['--n_head=0'], 'n_head must be > 0'),
        (['--pos=sinusoidal'], 'invalid gpt config: ValueError: pos must be learned|rope|alibi|none'),
        (['--sampler=shuffle'], "sampler must be 'random' or 'blocks'"),
        (['--dtype=fp16'], 'dtype must be auto, float32, bfloat16 or float16'),
        (['--device=gpu'], "device must be auto, cpu, cuda, cuda:N or mps, got 'gpu'"),
        (['--device=cuda:x'], "device must be auto, cpu, cuda, cuda:N or mps, got 'cuda:x'"),
        (['--device=cuda:99'], "device 'cuda:99'"),
        (['--dataset=odd'], 'not a whole positive number of uint16 tokens'),
        (['--dataset=empty'], 'holds 0 bytes'),
        (['--dataset=bigid'], 'holds token id 999, outside the vocabulary of'),
        (['--dataset=badjson'], 'meta.json is not valid JSON'),
        (['--dataset=novocab'], 'lacks a positive integer vocab_size'),
        (['--dataset=missing'], 'prepare the data first'),
        (['--block_size=100000'], 'fewer than the 100002 needed; lower --block_size'),
        (['--p_synth=0.5', '--synth_dataset=nosynth'], 'p_synth needs python prepare_data.py nosynth --input FILE'),
        ([f'--out_dir={d}/afile'], 'cannot write to out_dir'),
        ([f'--init_from={d}/nowhere'], 'no checkpoint at'),
        ([f'--init_from={d}/truncated'], 'is unreadable'),
        ([f'--init_from={d}/run', '--n_embd=32'], 'do not fit this config\'s GPT: size mismatch for'),
        (['--mask_id=-1', '--p_fill=0.5'], 'mask_id must be None or a token id >= 0'),
        (['--compile=maybe'], "compile must be None or bool, got 'maybe'"),
        (['--out_dir='], "out_dir must name a folder"),
        (['--seed=100000000000000000000000'], 'seed must be an integer from 0 to 2**63 - 1 = 9223372036854775807'),
        (['--seed=-1'], 'seed must be an integer from 0 to 2**63 - 1'),
        (['--dataset=' + '../' * 3 + 'etc'], "must be a plain folder name: letters, digits"),
        (['--synth_dataset=', '--p_synth=0.5'], "synth_dataset: dataset name '' must be a plain folder name"),
        ([f'--data_dir={d}/afile/data', '--dataset=synthetic'], 'cannot write the synthetic data under data_dir'),
        (['--dataset=shakespeare_byte'], 'prepare the data first (python prepare_data.py shakespeare --tokenizer byte)'),
        (['--dataset=fineweb_edu_gpt2_32768'], 'python prepare_data.py fineweb_edu --tokenizer gpt2 --vocab 32768'),
        ([f'{d}/badkey.py'], f"unknown config key 'lerning_rate' in {d}/badkey.py"),
        ([f'{d}/exits.py'], f"config file {d}/exits.py called sys.exit(0)"),
        ([f'{d}/badtype.py'], f"config key 'max_iters' in {d}/badtype.py expects int"),
        ([str(d)], 'is a folder, not a config file'),
    ])]
    # a key the chosen model has no field for would change nothing (train.py's shape defaults stay silent)
    train += [('train.py', [data, *BARE, f'--out_dir={d}/new/m{k}', *args], msg) for k, (args, msg) in enumerate([
        (['--model=parcae', '--n_layer=12'], "the parcae model has no 'n_layer' (given on the command line)"),
        (['--model=parcae', '--dropout=0.1'], "the parcae model has no 'dropout'"),
        (['--model=textnca', '--n_layer=3'], "the textnca model has no 'n_layer'"),
        (['--model=workspace', '--n_layer=3'], "the workspace model has no 'n_layer'"),
        (['--model=workspace', '--dropout=0.1'], "the workspace model has no 'dropout'"),
        (['--model=fon', '--n_head=8'], "the fon model has no 'n_head'"),
        (['--model=mamba2', '--n_head=8'], "the mamba2 model has no 'n_head'"),
        ([f'{d}/parcae_layers.py'], f"the parcae model has no 'n_layer' (given in {d}/parcae_layers.py)"),
    ])]
    if not torch.cuda.is_available():
        train.append(('train.py', [data, *TINY, '--device=cuda'], "device 'cuda': this machine has no CUDA GPU"))
    if not torch.backends.mps.is_available():
        train.append(('train.py', [data, *TINY, '--device=mps'], "device 'mps': MPS (Apple GPU) is not available"))
    train += [('train.py', [data, *TINY, *args], msg) for args, msg in [
        ([run], f'holds a trained run: continue it with python train.py {data} {" ".join(TINY)} {run} --init_from=resume, '
                f'start this run in another --out_dir, or replace it (and its log) with python train.py {data} '
                f'{" ".join(TINY)} {run} --overwrite=True'),
        ([run, '--eval_only=True'], 'would evaluate a fresh model, not the trained'),
        ([run, '--init_from=resume', '--n_embd=32', '--block_size=8'],
         "these settings differ from it: n_embd=32 (checkpoint: 16), block_size=8 (checkpoint: 16)"),
        ([f'--out_dir={d}/absent', '--init_from=resume'], "init_from='resume' but there is no checkpoint at"),
        ([f'--out_dir={d}/truncated', '--init_from=resume'], 'truncated/ckpt.pt is unreadable'),
        ([f'--out_dir={d}/empty', '--init_from=resume'], 'empty/ckpt.pt is unreadable (0 bytes'),
        ([f'--out_dir={d}/garbage', '--init_from=resume'], 'garbage/ckpt.pt is unreadable'),
        ([f'--out_dir={d}/foreign', '--init_from=resume'], 'is not a train.py checkpoint (it lacks model, model_name'),
        # a resumed run continues the run in its checkpoint: its data, batch and recipe
        ([run, '--init_from=resume', '--dataset=bigid'], "differ from it: dataset='bigid' (checkpoint: 'tiny')"),
        ([run, '--init_from=resume', '--batch_size=8'], "differ from it: batch_size=8 (checkpoint: 4)"),
        ([run, '--init_from=resume', '--learning_rate=0.01', '--seed=1'],
         "learning_rate=0.01 (checkpoint: 0.001), seed=1 (checkpoint: 1337)"),
        ([run, '--init_from=resume', f'{d}/otherdata.py'], "differ from it: dataset='bigid' (checkpoint: 'tiny')"),
    ]]
    train.append(('train.py', [data, f'--out_dir={d}/run', '--init_from=resume', '--dataset=bigid'],
                  "resume continues the run in"))
    # a disk that fills during the checkpoint write: the file, the space, the previous ckpt.pt whole
    train.append(('train.py:full_disk', [data, f'--out_dir={d}/full', '--init_from=resume', '--max_iters=2'],
                  'cannot write ' + f'{d}/full/ckpt.pt.tmp: No space left on device (it needs about'))
    # a disk full when a run starts: the lock, the log or config.json cannot be written
    train.append(('train.py:full_start', [data, *TINY, f'--out_dir={d}/fullstart'],
                  f'cannot write to out_dir {d}/fullstart: No space left on device ('))
    train.append(('train.py:full_config', [data, f'--out_dir={d}/full2', '--init_from=resume', '--max_iters=2'],
                  f'cannot write to out_dir {d}/full2: No space left on device ('))
    train += [('train.py', [data, *TINY, *args], msg) for args, msg in [
        (['--learning_rate=1e999', f'--out_dir={d}/new/inf'], 'learning_rate must be a finite number, got inf'),
        (['--min_lr=-1e999', f'--out_dir={d}/new/inf'], 'min_lr must be a finite number, got -inf'),
        # the battery's character map is not tiny's: its ids would mean other characters
        (['--p_synth=0.5', f'--out_dir={d}/new/synth'], "p_synth mixes synthetic's ids into tiny's, but they come from "
                                                        "other tokenizers"),
        ([run, '--init_from=resume', '--max_iters=0'], f'{d}/run/ckpt.pt holds iter 1, past --max_iters=0'),
        ([f'--out_dir={d}/dangling'], f'out_dir {d}/dangling is a symlink to {d}/gone, which does not exist'),
        # the data changed under a checkpoint: a resume says what changed and writes nothing
        ([f'--out_dir={d}/changed', '--init_from=resume', '--max_iters=2'],
         f"the data in {d}/data/tiny is not what the checkpoint trained on (train.bin holds 7,236 bytes (then 7,238); "
         f"val.bin's first MiB differs; vocab_size is 17 (then 12)"),
    ]]
    sample = [('sample.py', [run, *args], msg) for args, msg in [
        (['--num_samples=0'], 'num_samples must be >= 1'),
        (['--max_new_tokens=-1'], 'max_new_tokens must be >= 0'),
        (['--temperature=-1'], 'temperature must be >= 0'),
        (['--top_k=-5'], 'top_k must be >= 0'),
        (['--infill=True', '--num_candidates=0'], 'num_candidates must be >= 1'),
        (['--mask='], 'mask must be a non-empty marker'),
        (['--device=gpu'], "device must be auto, cpu, cuda, cuda:N or mps"),
        (['--device=cuda:99'], "device 'cuda:99'"),
        (['--start='], 'encodes to no tokens'),
        ([f'--start=FILE:{d}/latin1.txt'], 'is not UTF-8 text'),
        ([f'--start=FILE:{d}'], 'prompt file not found'),
        (['--start=ZEBRA'], 'cannot be encoded with the char tokenizer'),
        (['--num_recur=4'], 'unknown key(s) num_recur'),
        (['--top_k=many'], "config key 'top_k' expects int"),
        (['--seed=100000000000000000000000'], 'seed must be an integer from 0 to 2**63 - 1'),
        ([f'--start={"the cat " * 10}[MASK] mat', '--infill=True', '--candidates=sat|ran'],
         "longer than this GPT's learned position table (16 rows)"),
    ]] + [('sample.py', [f'--out_dir={d}/synrun', *args], msg) for args, msg in [
        (['--start=add 1_+2 ='], "the prompt holds the MASK token '_' (id"),
    ]] + [('sample.py', [f'--out_dir={d}/{name}', *args], msg) for name, args, msg in [
        ('parcae', ['--num_recur=0'], 'num_recur is a loop depth: it must be an integer >= 1, got 0'),
        ('parcae', ['--num_recur=-1'], 'num_recur is a loop depth: it must be an integer >= 1, got -1'),
        ('textnca', ['--Ts=0'], 'Ts is a loop depth: it must be an integer >= 1, got 0'),
        ('textnca', ['--Ts=-3'], 'Ts is a loop depth: it must be an integer >= 1, got -3'),
    ]] + [('sample.py', [f'--out_dir={d}/{name}'], msg) for name, msg in [
        ('absent', 'no checkpoint at'), ('truncated', 'is unreadable'), ('empty', 'is unreadable (0 bytes'),
        ('garbage', 'is unreadable'), ('foreign', 'is not a train.py checkpoint'),
        ('notok', "carries no tokenizer (meta['tokenizer'])")]]
    evals = [('eval.py', [run, *args], msg) for args, msg in [
        (['--eval_iters=0'], 'eval_iters must be a positive integer, got 0'),
        (['--batch_size=-1'], 'batch_size must be a positive integer'),
        (['--battery=True', '--battery_n=0'], 'battery_n must be a positive integer'),
        (['--device=cuda:99'], "device 'cuda:99'"),
        (['--device=tpu'], "device must be auto, cpu, cuda, cuda:N or mps"),
        (['--split=dev'], 'split must be train, val or test'),
        (['--split=test'], 'use --stream=True'),
        (['--sweep=num_recur'], '--sweep expects KNOB=V1,V2'),
        (['--sweep=num_recur=1..3'], "has no knob 'num_recur'"),
        (['--extrapolate=-5'], '--extrapolate expects positive integer lengths'),
        (['--dataset=bigid'], 'holds token id 999, outside the vocabulary of'),
        (['--dataset=badjson'], 'meta.json is not valid JSON'),
        (['--seed=abc'], "seed must be int, got 'abc'"),
        ([f'--out={d}/afile'], 'is a file; name a folder for the results'),
    ]] + [('eval.py', [f'--out_dir={d}/{name}', *args], msg) for name, args, msg in [
        ('parcae', ['--num_recur=0'], 'num_recur is a loop depth: it must be an integer >= 1, got 0'),
        ('parcae', ['--sweep=num_recur=-1,1'], 'num_recur is a loop depth: it must be an integer >= 1, got -1'),
        ('textnca', ['--Ts=0'], 'Ts is a loop depth: it must be an integer >= 1, got 0'),
    ]] + [('eval.py', args, msg) for args, msg in [
        ([f'--out_dir={d}/changed'], f"the data in {d}/data/tiny is not what the checkpoint trained on"),
        ([f'--out_dir={d}/truncated'], 'is unreadable'),
        ([f'--out_dir={d}/garbage'], 'is unreadable'),
        ([f'--out_dir={d}/absent'], 'no checkpoint at'),
        ([f'{d}/latin1.txt'], 'is neither'),
        (['--compare', f'{d}/run', f'{d}/absent'], 'is not a run folder'),
        (['--compare', f'{d}/run', f'{d}/badrun'], 'config.json is not valid JSON'),
        (['--compare', f'{d}/run', f'{d}/truncated'], 'is unreadable'),
    ]]
    return train + sample + evals


def full_disk(main, room=4096):
    """main, run where every checkpoint file run_folder.py writes takes room bytes, then raises ENOSPC."""
    import builtins
    import errno

    import run_folder

    class Full:
        def __init__(self, f):
            self.f, self.n = f, 0

        def write(self, b):
            self.n += len(b)
            if self.n > room:
                raise OSError(errno.ENOSPC, 'No space left on device')
            return self.f.write(b)

        def flush(self):
            self.f.flush()

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

    def run(args):
        run_folder.open = lambda path, mode='r', *a, **k: (Full if mode == 'wb' else lambda f: f)(builtins.open(path, mode, *a, **k))
        main(args)
    return run


def full_start(main, spare=()):
    """main, run where train.py and run_folder.py cannot open a file to write (but those named in
    spare): ENOSPC."""
    import builtins
    import errno

    def full_open(path, mode='r', *a, **k):
        if any(c in mode for c in 'wa+') and os.path.basename(str(path)) not in spare:
            raise OSError(errno.ENOSPC, 'No space left on device', str(path))
        return builtins.open(path, mode, *a, **k)

    def run(args):
        import run_folder
        main.__globals__['open'] = run_folder.open = full_open
        main(args)
    return run


def drive(table_path):
    """Runs each case of the table in a forked child; prints [exit code, stderr] per case."""
    import sample
    from conftest import train_script
    from tools import eval as evaluate
    mains = {'train.py': train_script().main, 'sample.py': sample.main, 'eval.py': evaluate.main,
             'train.py:full_disk': full_disk(train_script().main),
             'train.py:full_start': full_start(train_script().main),
             'train.py:full_config': full_start(train_script().main, spare=('.lock',))}
    results = []
    for k, (script, args) in enumerate(json.load(open(table_path))):
        err = f'{table_path}.{k}.err'
        pid = os.fork()
        if pid == 0:
            fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 2)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            code = 0
            try:
                mains[script](args)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except BaseException:
                import traceback
                traceback.print_exc()   # what the interpreter would print
                code = 1
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        results.append([os.waitstatus_to_exitcode(status), open(err).read()])
    print(json.dumps(results))


@pytest.fixture(scope='module')
def workspace(tmp_path_factory):
    """A tiny dataset, its broken variants, a trained run and broken checkpoints."""
    d = tmp_path_factory.mktemp('errors')
    data = d / 'data'
    make_char_dataset(str(data), n_chars=4000)
    run_script('train.py', f'--data_dir={data}', *TINY, f'--out_dir={d}/run', '--max_iters=1')
    for name, model in [('parcae', PARCAE), ('textnca', TEXTNCA)]:
        run_script('train.py', f'--data_dir={data}', *BARE, *model, f'--out_dir={d}/{name}')
    import prepare_data
    prepare_data.prepare('synthetic', out_dir=str(data), n_train=300, n_val=30, quiet=True)
    run_script('train.py', f'--data_dir={data}', *TINY, '--dataset=synthetic', f'--out_dir={d}/synrun')
    # the data changed under a checkpoint: its record says train.bin was 2 bytes longer, val.bin began
    # otherwise, the vocabulary held 12
    changed = torch.load(d / 'run' / 'ckpt.pt', weights_only=False)
    changed['data']['train']['bytes'] += 2
    changed['data']['val']['head'] = '0' * 64
    changed['data']['vocab_size'] = 12
    (d / 'changed').mkdir()
    torch.save(changed, d / 'changed' / 'ckpt.pt')
    (d / 'changed' / 'log.jsonl').write_bytes((d / 'run' / 'log.jsonl').read_bytes())
    os.symlink(d / 'gone', d / 'dangling')
    for full in ('full', 'full2'):
        (d / full).mkdir()
        for name in ('ckpt.pt', 'log.jsonl', 'config.json'):
            (d / full / name).write_bytes((d / 'run' / name).read_bytes())
    for name, text in [('badkey', 'lerning_rate = 1e-3\n'), ('exits', 'import sys\nsys.exit(0)\n'),
                       ('badtype', 'max_iters = "ten"\n'), ('otherdata', "dataset = 'bigid'\n"),
                       ('parcae_layers', "model = 'parcae'\nn_layer = 12\n")]:
        (d / f'{name}.py').write_text(text)
    good = (data / 'tiny' / 'train.bin').read_bytes()
    meta = (data / 'tiny' / 'meta.json').read_text()
    variants = {'odd': (good + b'\x01', meta), 'empty': (b'', meta),
                'bigid': (good + np.array([999], dtype=np.uint16).tobytes(), meta),
                'badjson': (good, '{"vocab_size": 13,'), 'novocab': (good, '{"tokenizer": "char"}')}
    for name, (bin_bytes, meta_text) in variants.items():
        (data / name).mkdir()
        for split in ('train', 'val'):
            (data / name / f'{split}.bin').write_bytes(bin_bytes if split == 'train' or name != 'empty' else good)
        (data / name / 'meta.json').write_text(meta_text)
    (data / 'empty' / 'val.bin').write_bytes(b'')
    ckpt = (d / 'run' / 'ckpt.pt').read_bytes()
    notok = torch.load(d / 'run' / 'ckpt.pt', weights_only=False)
    notok['meta'] = {'vocab_size': notok['meta']['vocab_size']}
    for name, content in [('truncated', ckpt[:len(ckpt) // 2]), ('empty', b''), ('garbage', os.urandom(4096))]:
        (d / name).mkdir()
        (d / name / 'ckpt.pt').write_bytes(content)
    for name, obj in [('foreign', {'weights': torch.zeros(2)}), ('notok', notok)]:
        (d / name).mkdir()
        torch.save(obj, d / name / 'ckpt.pt')
    (d / 'badrun').mkdir()
    (d / 'badrun' / 'config.json').write_text('{not json')
    (d / 'afile').write_text('a file where a folder belongs')
    (d / 'latin1.txt').write_bytes('caf\xe9'.encode('latin-1'))
    return d


def digest(path):
    return hashlib.sha256(open(path, 'rb').read()).hexdigest()


def test_every_mistake_is_one_line(workspace):
    d = workspace
    table = cases(d)
    before = {p: digest(p) for p in (d / 'run' / 'ckpt.pt', d / 'run' / 'log.jsonl', d / 'run' / 'config.json',
                                     d / 'full' / 'ckpt.pt', d / 'full2' / 'log.jsonl', d / 'full2' / 'config.json',
                                     d / 'changed' / 'ckpt.pt', d / 'changed' / 'log.jsonl', d / 'parcae' / 'ckpt.pt')}
    before.update({p: digest(p) for p in (d / 'data' / 'tiny').iterdir()})
    path = d / 'table.json'
    path.write_text(json.dumps([[script, [str(a) for a in args]] for script, args, _ in table]))
    p = run_script(os.path.join('tests', 'test_errors.py'), path, timeout=600)
    results = json.loads(p.stdout.strip().splitlines()[-1])
    bad = []
    for (script, args, msg), (code, err) in zip(table, results):
        lines = err.strip().splitlines()
        if code == 0 or 'Traceback' in err or not 1 <= len(lines) <= 3 or msg not in err:
            bad.append(f"{script} {' '.join(map(str, args))}\n  exit {code}, stderr:\n{err[-1500:]}\n  wanted: {msg}")
    assert not bad, '\n'.join(bad)
    # refused commands touched nothing: the trained run is byte-identical, no empty folder appeared
    assert before == {p: digest(p) for p in before}
    for name in ('absent', 'new', 'gone', 'changed/config.json'):
        assert not os.path.exists(d / name)
    assert not [f for f in os.listdir(d / 'full') + os.listdir(d / 'full2') if f.endswith('.tmp')]


if __name__ == '__main__':
    sys.path.insert(0, ROOT)
    drive(sys.argv[1])


def one_line(p, msg, code=None):
    """p failed (with code, when given) in at most three lines of stderr that say msg, no traceback."""
    err = p.stderr if isinstance(p.stderr, str) else p.stderr.decode()
    assert (p.returncode == code if code is not None else p.returncode != 0), (p.returncode, err)
    assert 'Traceback' not in err and 1 <= len(err.strip().splitlines()) <= 3 and msg in err, err


def start_train(d, *args):
    import subprocess
    import signal
    cmd = [sys.executable, 'train.py', f'--data_dir={d}/data', *TINY, *args]
    # SIGINT and SIGHUP as a terminal delivers them, even where the suite runs in the background (which
    # ignores SIGINT) or under nohup (which ignores SIGHUP, and train.py rightly keeps it ignored)
    return subprocess.Popen(cmd, cwd=conftest.CHECKOUT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONUNBUFFERED': '1'},
                            preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGINT, signal.SIGHUP)])


def interrupt_when(p, words, sig=None):
    """SIGINT (or sig) p once its stdout shows a line with words; (returncode, stderr)."""
    import signal
    for line in p.stdout:
        if words in line:
            p.send_signal(sig or signal.SIGINT)
            break
    p.stdout.read()
    p.wait(timeout=120)
    return p


def test_two_runs_into_one_out_dir(workspace):
    d = workspace
    runs = [start_train(d, f'--out_dir={d}/race', '--max_iters=30', '--log_interval=1') for _ in range(2)]
    for p in runs:
        p.stdout.read()
        p.wait(timeout=300)
    ok = [p for p in runs if p.returncode == 0]
    assert len(ok) == 1, [p.stderr.read() for p in runs]
    loser = next(p for p in runs if p.returncode != 0)
    loser.stderr = loser.stderr.read()
    assert 'Traceback' not in loser.stderr and len(loser.stderr.strip().splitlines()) == 1, loser.stderr
    # the winner writes its pid just after it takes the lock: a loser that reads the file in between says 'unknown'
    assert re.search(r'is in use by pid (\d+|unknown)|holds a trained run|changed while this run started', loser.stderr)
    iters = [json.loads(line)['iter'] for line in open(d / 'race' / 'log.jsonl') if '"train"' in line]
    assert iters == list(range(30))


def test_ctrl_c_names_the_iteration_and_the_resume_command(workspace):
    d = workspace
    p = interrupt_when(start_train(d, f'--out_dir={d}/ctrlc', '--max_iters=100000', '--log_interval=1',
                                   '--eval_interval=5'), 'iter 12:')
    p.stderr = p.stderr.read()
    one_line(p, f'--init_from=resume --out_dir={d}/ctrlc', code=130)
    held = re.search(r'interrupted at iter \d+; .*ckpt.pt holds iter (\d+)', p.stderr)
    assert held and not os.path.exists(d / 'ctrlc' / 'ckpt.pt.tmp')
    # the command, pasted (and told to evaluate, so that it stops), resumes the run with this one's settings
    cmd = pasted(p.stderr, 'continue with') + ['--eval_only=True']
    assert '--max_iters=100000' in cmd
    q = run_script(*cmd[1:])
    assert f'step {held.group(1)}: train loss' in q.stdout, q.stdout


def test_overwrite_interrupted_before_its_first_checkpoint_keeps_the_old_run(workspace):
    d = workspace
    src = d / 'run'
    (d / 'old').mkdir()
    for name in ('ckpt.pt', 'log.jsonl', 'config.json'):
        (d / 'old' / name).write_bytes((src / name).read_bytes())
    before = {n: digest(d / 'old' / n) for n in os.listdir(d / 'old')}
    # the first eval of a long eval set: interrupted before the new run saves anything
    p = interrupt_when(start_train(d, f'--out_dir={d}/old', '--overwrite=True', '--eval_iters=100000'), 'mfu against')
    p.stderr = p.stderr.read()
    one_line(p, 'before the first checkpoint', code=130)
    assert 'back in place' in p.stderr
    assert {n: digest(d / 'old' / n) for n in os.listdir(d / 'old') if n != '.lock'} == before


@pytest.mark.parametrize('sig, code', [('SIGTERM', 143), ('SIGHUP', 129)])
def test_a_schedulers_sigterm_and_a_closed_terminals_sighup_are_a_ctrl_c(workspace, sig, code):
    import signal
    d = workspace
    p = start_train(d, f'--out_dir={d}/{sig}', '--max_iters=100000', '--log_interval=1', '--eval_interval=5')
    for line in p.stdout:
        if 'iter 12:' in line:
            p.send_signal(getattr(signal, sig))
            break
    p.stdout.read()
    p.wait(timeout=120)
    p.stderr = p.stderr.read()
    one_line(p, f'continue with python train.py --data_dir={d}/data', code=code)
    assert f'--init_from=resume --out_dir={d}/{sig}' in p.stderr
    assert re.search(rf'interrupted by {sig} at iter \d+; .*ckpt.pt holds iter \d+', p.stderr)
    assert not [f for f in os.listdir(d / sig) if f.endswith('.tmp')]


def slow_save_child(d, out, *args):
    """train.py in a child whose checkpoint writes stall for seconds once begun (a big model's save),
    saying 'saving' on stdout, so a signal lands inside the first save."""
    import subprocess
    code = ("import sys, time, runpy; sys.path.insert(0, '.'); import models, torch\n"
            "save = torch.save\n"
            "def slow(obj, f):\n"
            "    f.write(b'x' * 4096); print('saving', flush=True); time.sleep(30); save(obj, f)\n"
            "models.torch.save = slow\n"
            "runpy.run_path('train.py', run_name='__main__')\n")
    cmd = [sys.executable, '-c', code, f'--data_dir={d}/data', *TINY, f'--out_dir={out}', *args]
    return subprocess.Popen(cmd, cwd=conftest.CHECKOUT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONUNBUFFERED': '1'})


def test_sigterm_inside_the_first_save_leaves_no_tmp(workspace):
    import signal
    d = workspace
    p = slow_save_child(d, d / 'firstsave', '--max_iters=5')
    for line in p.stdout:
        if 'saving' in line:
            assert os.path.exists(d / 'firstsave' / 'ckpt.pt.tmp')
            p.send_signal(signal.SIGTERM)
            break
    p.stdout.read()
    p.wait(timeout=120)
    p.stderr = p.stderr.read()
    one_line(p, 'interrupted by SIGTERM at iter 0, before the first checkpoint: nothing to resume', code=143)
    assert sorted(os.listdir(d / 'firstsave')) == ['.lock', 'config.json', 'log.jsonl']


def test_overwrite_never_moves_another_run_or_foreign_files(workspace):
    # the legacy layout: a run folder inside the default run's out/, and a file no run writes
    d = workspace
    out = d / 'legacy'
    shutil.copytree(d / 'run', out)
    shutil.copytree(d / 'run', out / 'cpu_parcae')
    (out / 'notes.txt').write_text('mine')
    (out / 'eval').mkdir()
    (out / 'eval' / 'old.json').write_text('{}')
    theirs = {p: digest(p) for p in [out / 'notes.txt', *(out / 'cpu_parcae').iterdir()]}
    p = start_train(d, f'--out_dir={out}', '--overwrite=True', '--max_iters=2', '--eval_interval=2')
    p.stdout.read()
    p.wait(timeout=120)
    assert p.returncode == 0, p.stderr.read()
    assert theirs == {p: digest(p) for p in theirs}
    assert sorted(os.listdir(out)) == ['.lock', 'ckpt.pt', 'config.json', 'cpu_parcae', 'log.jsonl', 'notes.txt']
    assert torch.load(out / 'ckpt.pt', weights_only=False)['iter_num'] == 2


def test_overwrite_killed_before_its_first_checkpoint_is_put_back_at_the_next_start(workspace):
    import signal
    import subprocess
    d = workspace
    out = d / 'killed'
    shutil.copytree(d / 'run', out)
    before = {n: digest(out / n) for n in ('ckpt.pt', 'log.jsonl', 'config.json')}
    p = start_train(d, f'--out_dir={out}', '--overwrite=True', '--eval_iters=100000')
    for line in p.stdout:
        if 'mfu against' in line:
            p.send_signal(signal.SIGKILL)
            break
    p.wait(timeout=120)
    assert os.path.isfile(out / 'replaced' / 'ckpt.pt') and not os.path.exists(out / 'ckpt.pt')
    # what reads a checkpoint names replaced/ and how it comes back
    q = subprocess.run([sys.executable, 'sample.py', f'--out_dir={out}'], cwd=conftest.CHECKOUT, capture_output=True, text=True,
                       env={**os.environ, 'OMP_NUM_THREADS': '1'})
    one_line(q, f'{out}/replaced/ holds the run an interrupted --overwrite set aside')
    q = start_train(d, f'--out_dir={out}', '--init_from=resume', '--eval_only=True')
    q.stdout.read()
    q.wait(timeout=120)
    err = q.stderr.read()
    assert q.returncode == 0 and err.count('put back the run in') == 1, err
    assert {n: digest(out / n) for n in before} == before and not os.path.exists(out / 'replaced')


def test_a_resume_with_float16_on_a_run_saved_without_a_scaler(workspace):
    # the fp32 run saved an empty scaler state: the fp16 resume starts a fresh scaler, as a new fp16 run does
    d = workspace
    out = d / 'fp16'
    shutil.copytree(d / 'run', out)
    p = start_train(d, f'--out_dir={out}', '--init_from=resume', '--dtype=float16', '--max_iters=3')
    p.stdout.read()
    p.wait(timeout=120)
    assert p.returncode == 0, p.stderr.read()
    assert torch.load(out / 'ckpt.pt', weights_only=False)['scaler']['scale'] > 0


def torchrun(d, *args):
    import subprocess
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2', 'train.py',
           f'--data_dir={d}/data', *TINY, *args]
    return subprocess.Popen(cmd, cwd=conftest.CHECKOUT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONUNBUFFERED': '1'})


def test_torchrun_bad_data_is_one_line_and_sigterm_names_the_torchrun_command(workspace):
    import signal
    d = workspace
    # token ids only rank 0 reads: rank 1 stops with it, without a traceback of its own
    p = torchrun(d, '--dataset=bigid', f'--out_dir={d}/new/ddp')
    out, err = p.communicate(timeout=300)
    assert p.returncode != 0 and err.count('error: ') == 1 and 'holds token id 999' in err, err
    assert 'train.py' not in ''.join(ln for ln in err.splitlines() if ln.startswith('  File')), err
    # SIGTERM to torchrun (a scheduler's): rank 0's line repeats the launch command
    p = torchrun(d, f'--out_dir={d}/ddpterm', '--max_iters=100000', '--log_interval=1', '--eval_interval=5')
    for line in p.stdout:
        if 'iter 12:' in line:
            p.send_signal(signal.SIGTERM)
            break
    p.stdout.read()
    p.wait(timeout=120)
    err = p.stderr.read()
    assert err.count('interrupted by SIGTERM') == 1, err
    assert f'continue with torchrun --standalone --nproc_per_node=2 train.py --data_dir={d}/data' in err, err
    assert f'--init_from=resume --out_dir={d}/ddpterm' in err, err
    assert 'train.py' not in ''.join(ln for ln in err.splitlines() if ln.startswith('  File')), err


def test_digits_as_text_and_a_closed_pipe(workspace):
    import subprocess
    d = workspace
    p = subprocess.run([sys.executable, 'sample.py', f'--out_dir={d}/synrun', '--start=123', '--max_new_tokens=2'],
                       cwd=conftest.CHECKOUT, capture_output=True, text=True, env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert p.returncode == 0 and p.stdout.startswith('123'), p.stderr
    p = subprocess.run(f"{sys.executable} sample.py --out_dir={d}/synrun --num_samples=64 --max_new_tokens=64 | head -1",
                       shell=True, cwd=conftest.CHECKOUT, capture_output=True, text=True, env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert 'Traceback' not in p.stderr and 'BrokenPipe' not in p.stderr, p.stderr


def test_compare_across_datasets_warns(workspace):
    import subprocess
    d = workspace
    p = subprocess.run([sys.executable, '-m', 'tools.eval', '--compare', f'{d}/run', f'{d}/synrun', f'--out={d}/cmp'],
                       cwd=conftest.CHECKOUT, capture_output=True, text=True, env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert p.returncode == 0, p.stderr
    assert 'trained on different datasets (synthetic, tiny)' in p.stderr and '| dataset |' in p.stdout


# ----------------------------------------------------------------------------- the tools' side
# sample.py, prepare_data.py and tools.*: --help, one line per mistake, signals, results kept whole

def drive_scripts(table_path):
    """Each case [script, args, stdin] run as `python script args` (`python -m` for a module) runs it,
    in a forked child of this process, which imported torch and the tools' modules once; a child that
    starts a subprocess (tools.results' training) fails. Prints [exit code, stdout, stderr] per case."""
    import runpy
    import subprocess
    import traceback
    import sample                    # noqa: F401  the children's imports, once
    import tools.eval                # noqa: F401
    import tools.bench               # noqa: F401
    import tools.results             # noqa: F401

    def refuse(*a, **k):
        raise RuntimeError(f'started a subprocess: {a[0] if a else k}')
    results = []
    for k, (script, args, stdin) in enumerate(json.load(open(table_path))):
        out, err = f'{table_path}.{k}.out', f'{table_path}.{k}.err'
        open(f'{table_path}.{k}.in', 'w').write(stdin or '')
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            for fd, path, flags in ((0, f'{table_path}.{k}.in', os.O_RDONLY), (1, out, os.O_WRONLY | os.O_CREAT),
                                    (2, err, os.O_WRONLY | os.O_CREAT)):
                os.dup2(os.open(path, flags), fd)
            subprocess.Popen = refuse
            sys.argv = [script, *args]
            code = 0
            try:
                if script.endswith('.py'):
                    runpy.run_path(os.path.join(ROOT, script), run_name='__main__')
                else:
                    sys.modules.pop(script, None)   # run afresh as __main__, as `python -m` does
                    runpy.run_module(script, run_name='__main__', alter_sys=True)
            except SystemExit as e:
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
                code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        results.append([os.waitstatus_to_exitcode(status), open(out).read(), open(err).read()])
    print(json.dumps(results))


def run_table(d, table, name):
    """[(script, args, stdin, exit code, words in stdout (code 0) or in the one line on stderr)] -> failures."""
    path = d / f'{name}.json'
    path.write_text(json.dumps([[s, [str(a) for a in args], stdin] for s, args, stdin, _, _ in table]))
    p = run_script('-c', 'import sys; sys.path[:0] = ["tests", "."]; import test_errors; '
                   'test_errors.drive_scripts(sys.argv[1])', path, timeout=600)
    bad = []
    for (script, args, stdin, code, msg), (got, out, err) in zip(table, json.loads(p.stdout.strip().splitlines()[-1])):
        lines = err.strip().splitlines()
        ok = got == code and 'Traceback' not in err and (
            msg in out if code == 0 else len(lines) == 1 and lines[0].startswith('error: ') and msg in err)
        if not ok:
            bad.append(f"{script} {' '.join(map(str, args))}\n  exit {got}, stdout {out[-500:]!r}\n  stderr: {err[-1500:]}"
                       f"\n  wanted: exit {code}, {msg!r}")
    return bad


@pytest.fixture(scope='module')
def tools_workspace(workspace):
    """workspace, plus a FON trained on characters (no MASK row), a copy of tiny and a dataset whose
    char map permutes tiny's, a run whose log.jsonl is a folder and a whole sweep result of the parcae run."""
    d = workspace
    run_script('train.py', f'--data_dir={d}/data', *BARE, '--model=fon', '--n_layer=1', '--n_embd=16', '--n_taps=2',
               '--max_delay=7', '--n_ripple=1', '--ripple_widths=(4,)', '--addr_window=4', f'--out_dir={d}/fon')
    meta = json.loads((d / 'data' / 'tiny' / 'meta.json').read_text())
    for name in ('same', 'other'):
        (d / 'data' / name).mkdir()
        for split in ('train', 'val'):
            (d / 'data' / name / f'{split}.bin').write_bytes((d / 'data' / 'tiny' / f'{split}.bin').read_bytes())
        (d / 'data' / name / 'meta.json').write_text(json.dumps(meta))
        meta['itos'] = meta['itos'][::-1]
        meta['stoi'] = {c: i for i, c in enumerate(meta['itos'])}
    (d / 'logdir').mkdir()
    for name in ('ckpt.pt', 'config.json'):
        (d / 'logdir' / name).write_bytes((d / 'run' / name).read_bytes())
    (d / 'logdir' / 'log.jsonl').mkdir()
    (d / 'parcae' / 'eval').mkdir(exist_ok=True)
    (d / 'parcae' / 'eval' / 'sweep_num_recur.json').write_text('{"values": [1, 2], "whole": true}')
    return d


def test_every_script_answers_help_and_says_a_mistake_in_one_line(tools_workspace):
    d = tools_workspace
    run, fon, parcae = f'--out_dir={d}/run', f'--out_dir={d}/fon', f'--out_dir={d}/parcae'
    sweep = d / 'parcae' / 'eval' / 'sweep_num_recur.json'
    before = digest(sweep)
    table = [   # --help: the usage on stdout, exit 0, nothing started (tools.results would start its training)
        ('sample.py', ['--help'], None, 0, 'Generate or infill text with a trained model.'),
        ('prepare_data.py', ['--help'], None, 0, 'usage: prepare_data.py'),
        ('tools.eval', ['--help'], None, 0, 'Evaluate a checkpoint'),
        ('tools.bench', ['--help'], None, 0, 'Speed and memory of every model'),
        ('tools.results', ['parcae', '--help'], None, 0, "Each paper's claim at a scale a CPU can run"),
        ('tools.results', ['--help'], None, 0, "Each paper's claim at a scale a CPU can run"),
        ('tools.eval_fill', ['--help'], None, 0, "eval.py's hole-filling analyses"),
        ('sample.py', [run, '--start=FILE:/dev/stdin', '--max_new_tokens=2'], 'the cat', 0, 'the cat'),
        ('tools.eval', [run, '--dataset=same'], None, 0, f'wrote {d}/run/eval/same/score_val.json'),   # beside the run's own
    ] + [(script, args, None, 2, msg) for script, args, msg in [
        ('tools.results', ['nonsense'], "unknown paper 'nonsense' (usage: python -m tools.results {textnca|"),
        ('tools.results', ['parcae', '--sedes=2'], "unknown option '--sedes=2'"),
        ('tools.results', ['parcae', '--seeds'], '--seeds takes a value: --seeds=N'),
        ('tools.results', ['parcae', '--jobs=0'], "--jobs must be a whole number >= 1, got '0'"),
        ('tools.bench', ['--modles=gpt'], "unknown config key 'modles' (did you mean: models?)"),
        ('tools.eval', [run, '--bogus=1'], "unknown key 'bogus'"),
        ('sample.py', [run, '--bogus=1'], 'unknown key(s) bogus'),
        ('prepare_data.py', ['mine', '--tokenizer=nonsense'], "argument --tokenizer: invalid choice: 'nonsense'"),
        ('prepare_data.py', ['mine', '--bogus'], 'unrecognized arguments: --bogus'),
        ('prepare_data.py', [], 'the following arguments are required: name'),
        ('tools.eval_fill', [run], 'run them with python -m tools.eval --out_dir=RUN --infill=True'),
        # a FON trained on characters has no MASK row: sample.py says what tools.eval says
        ('sample.py', [fon, '--infill=True', '--start=the [MASK] sat'], 'has 17 embedding rows, no row for the MASK id 17'),
        ('tools.eval', [fon, '--infill=True'], 'has 17 embedding rows, no row for the MASK id 17'),
        # unbounded work needs asking for by name
        ('sample.py', [parcae, '--num_recur=1000000000'],
         'num_recur=1000000000 runs the loop 1000000000 times per token, above max_depth=1000: pass --max_depth=1000000000'),
        ('sample.py', [run, '--max_depth=0'], 'max_depth must be >= 1, got 0'),
        ('tools.eval', [parcae, '--num_recur=1000000000'], 'above max_depth=1000: pass --max_depth=1000000000'),
        ('tools.eval', [parcae, '--sweep=num_recur=1..100000'],
         'has 100000 points (above max_points=64) and depths up to 100000 (above max_depth=1000): '
         'pass --max_points=100000 --max_depth=100000'),
        ('tools.eval', [parcae, '--sweep=num_recur=1..65'], 'pass --max_points=65 to run it anyway'),
        ('tools.eval', [parcae, '--sweep=num_recur=5..1'], 'the range 5..1 is empty'),
        ('tools.eval', [run, '--dataset=other'], "other/meta.json does not match the vocabulary this checkpoint was "
                                                 "trained with (dataset 'tiny'): char map: the same characters with other ids"),
        ('tools.eval', ['--compare', f'{d}/run', f'{d}/logdir', f'--out={d}/cmp2'], 'logdir/log.jsonl is not a file'),
        ('tools.bench', ['--decode=True', '--max_context=0'], 'max_context must be an integer >= 1'),
        ('tools.bench', ['--decode=True', '--max_context=100'], 'is <= max_context=100: pass --contexts=100'),
        ('tools.bench', [f'--json={d}'], 'is a folder; name a file for the records'),
        ('sample.py', [run, f'--start=FILE:{d}'], 'is a folder'),
    ]]
    bad = run_table(d, table, 'tools_table')
    assert not bad, '\n'.join(bad)
    assert digest(sweep) == before and sorted(os.listdir(sweep.parent)) == ['sweep_num_recur.json']
    assert os.listdir(d / 'run' / 'eval') == ['same']    # the refused eval on other data wrote nothing


def test_a_stopped_sweep_keeps_the_last_whole_result(tools_workspace, monkeypatch, capsys):
    from tools import eval as evaluate
    d = tools_workspace
    sweep = d / 'parcae' / 'eval' / 'sweep_num_recur.json'
    before = digest(sweep)
    score, calls = evaluate.Evaluator.score, []

    def stop_at_the_second(self, *a, **k):
        calls.append(k)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return score(self, *a, **k)
    monkeypatch.setattr(evaluate.Evaluator, 'score', stop_at_the_second)
    with pytest.raises(SystemExit) as e:
        evaluate.main([f'--out_dir={d}/parcae', '--sweep=num_recur=1..3'])
    assert e.value.code == 130 and 'sweep_*.partial.json' in capsys.readouterr().err
    assert digest(sweep) == before    # the whole result of before, not a partial one
    part = json.loads((sweep.parent / 'sweep_num_recur.partial.json').read_text())
    assert part['values'] == [1] and part['partial']
    monkeypatch.setattr(evaluate.Evaluator, 'score', score)
    evaluate.main([f'--out_dir={d}/parcae', '--sweep=num_recur=1..3'])
    assert json.loads(sweep.read_text())['values'] == [1, 2, 3]
    assert sorted(os.listdir(sweep.parent)) == ['sweep_num_recur.json', 'sweep_num_recur.png']


SLOW_PREPARE = ('import sys, time\nimport prepare_data as P\nids = P._char_ids\n'
                'def slow(*a):\n    print("WRITING", flush=True)\n    time.sleep(60)\n    return ids(*a)\n'
                'P._char_ids = slow\nP.main(sys.argv[1:])')


def prepare_until_writing(text, out):
    """prepare_data.py mine --input text --out_dir out, in a child that stops for a minute inside its writing
    (with a terminal's SIGHUP, even where the suite runs under nohup)."""
    import signal
    import subprocess
    p = subprocess.Popen([sys.executable, '-c', SLOW_PREPARE, 'mine', '--input', str(text), '--out_dir', str(out)],
                         cwd=conftest.CHECKOUT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    assert p.stdout.readline() == 'WRITING\n'
    return p


def prepared_mine(tmp_path):
    """(its text, data_dir, digests of its files) of a small dataset 'mine' prepared from a text file."""
    import prepare_data
    text = tmp_path / 'in.txt'
    text.write_text('the cat sat on the mat.\n' * 200)
    out = tmp_path / 'data'
    prepare_data.prepare('mine', input=str(text), out_dir=str(out), quiet=True)
    return text, out, {f: digest(out / 'mine' / f) for f in os.listdir(out / 'mine')}


def test_a_signalled_prepare_removes_its_work_and_a_killed_ones_is_removed_later(tmp_path):
    import signal
    import socket
    import prepare_data
    text, out, before = prepared_mine(tmp_path)
    for sig, code in ((signal.SIGTERM, 143), (signal.SIGHUP, 129)):   # a scheduler; a closed terminal
        p = prepare_until_writing(text, out)
        assert [f for f in os.listdir(out) if f.startswith('.mine.new')]    # at work
        p.send_signal(sig)
        err = p.communicate(timeout=60)[1]
        lines = [ln for ln in err.strip().splitlines() if 'tok/s' not in ln]      # but the progress bar
        assert p.returncode == code and 'Traceback' not in err, err
        assert lines == [f'interrupted ({sig.name}): any previous dataset there is unchanged'], err
        assert sorted(os.listdir(out)) == ['mine'] and {f: digest(out / 'mine' / f) for f in before} == before
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:    # under nohup a closed terminal does not stop it: an ignored SIGHUP stays ignored
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        with pytest.raises(SystemExit):
            prepare_data.main(['--help'])
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN and signal.getsignal(signal.SIGTERM) is prepare_data._stop
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    p = prepare_until_writing(text, out)
    p.kill()                        # kill -9: nothing runs on the way out
    p.communicate(timeout=60)
    left = [f for f in os.listdir(out) if f.startswith('.mine.new')]
    assert len(left) == 1 and left[0].endswith(f'{p.pid}@{socket.gethostname()}')
    busy = out / f'.mine.new1@{socket.gethostname()}'                 # a live process's work (init's)
    elsewhere = out / '.mine.new1@another-host'                       # another machine's: it may be writing
    for folder in (busy, elsewhere):
        folder.mkdir()
    mine_too = out / '.mine.keep'
    mine_too.mkdir()                # not a work folder's name
    prepare_data.prepare('mine', input=str(text), out_dir=str(out), quiet=True)
    assert sorted(os.listdir(out)) == sorted(['mine', busy.name, elsewhere.name, mine_too.name])


def test_a_dataset_set_aside_by_a_killed_swap_is_put_back(tmp_path):
    import socket
    import prepare_data
    text, out, before = prepared_mine(tmp_path)
    # killed between the swap's two renames: the previous dataset sits aside, no data/mine
    os.replace(out / 'mine', out / f'.mine.old999999999@{socket.gethostname()}')
    with pytest.raises(prepare_data.DataError, match='too small to split'):
        prepare_data.prepare('mine', input=str(text), out_dir=str(out), quiet=True, val_frac=0.0001)
    assert sorted(os.listdir(out)) == ['mine'] and {f: digest(out / 'mine' / f) for f in before} == before


def test_a_reader_keeps_the_dataset_it_opened_while_prepare_replaces_it(tmp_path):
    import prepare_data
    a, b = tmp_path / 'a.txt', tmp_path / 'b.txt'
    a.write_text('the cat sat on the mat.\n' * 200)
    b.write_text('A DOG RAN TO IT!\n' * 300)
    out = str(tmp_path / 'data')
    prepare_data.prepare('mine', input=str(a), out_dir=out, quiet=True)
    train = np.memmap(os.path.join(out, 'mine', 'train.bin'), dtype=np.uint16, mode='r')
    val = open(os.path.join(out, 'mine', 'val.bin'), 'rb')
    old, old_val = train.copy(), open(os.path.join(out, 'mine', 'val.bin'), 'rb').read()
    prepare_data.prepare('mine', input=str(b), out_dir=out, quiet=True)
    assert len(np.fromfile(os.path.join(out, 'mine', 'train.bin'), dtype=np.uint16)) != len(old)   # replaced
    assert np.array_equal(train, old) and val.read() == old_val      # what the reader opened is still there


def test_prepare_onto_a_full_disk_names_enospc_the_file_and_the_free_space(tmp_path, monkeypatch, capsys):
    import builtins
    import errno
    import prepare_data
    text = tmp_path / 'in.txt'
    text.write_text('the cat sat on the mat.\n' * 2000)
    out = tmp_path / 'data'
    prepare_data.prepare('mine', input=str(text), out_dir=str(out), quiet=True)
    before = {f: digest(out / 'mine' / f) for f in os.listdir(out / 'mine')}

    class Full:      # a file that takes 4096 bytes, then the disk is full
        def __init__(self, f):
            self.f, self.n = f, 0

        def write(self, b):
            self.n += memoryview(b).nbytes
            if self.n > 4096:
                raise OSError(errno.ENOSPC, 'No space left on device')
            return self.f.write(b)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()
    monkeypatch.setattr(prepare_data, 'open', lambda path, mode='r', **k: Full(builtins.open(path, mode, **k))
                        if 'w' in mode else builtins.open(path, mode, **k), raising=False)
    monkeypatch.setattr(prepare_data.signal, 'signal', lambda *a: None)    # main's handlers: not in pytest's process
    with pytest.raises(SystemExit) as e:
        prepare_data.main(['mine', '--input', str(text), '--out_dir', str(out)])
    err = capsys.readouterr().err
    lines = [ln for ln in err.strip().splitlines() if 'tok/s' not in ln]
    assert e.value.code == 2 and len(lines) == 1, err
    assert re.fullmatch(r'error: no space left on the device \(ENOSPC\) writing \S+/data/\.mine\.new\d+@\S+/train\.bin: '
                        r'[\d,]+\.\d MiB free there; free some space and run the same command again .*', lines[0]), err
    assert sorted(os.listdir(out)) == ['mine'] and {f: digest(out / 'mine' / f) for f in before} == before


def test_prepare_replaces_only_a_folder_of_its_own_and_a_linked_one_where_it_lives(tmp_path):
    import prepare_data
    text = tmp_path / 'in.txt'
    text.write_text('the cat sat on the mat.\n' * 200)
    out = tmp_path / 'data'
    (out / 'mine').mkdir(parents=True)
    (out / 'mine' / 'input.txt').write_text('a nanoGPT-style folder: the text beside the tokens')
    (out / 'mine' / 'train.bin').write_bytes(b'\0\0')
    with pytest.raises(prepare_data.DataError, match=r'mine holds files prepare_data.py did not write \(input.txt\)'):
        prepare_data.prepare('mine', input=str(text), out_dir=str(out), quiet=True)
    assert sorted(os.listdir(out / 'mine')) == ['input.txt', 'train.bin']
    big = tmp_path / 'big'
    prepare_data.prepare('mine', input=str(text), out_dir=str(big), quiet=True)
    (tmp_path / 'linked').mkdir()
    os.symlink(big / 'mine', tmp_path / 'linked' / 'mine')   # data/NAME -> a folder on a bigger disk
    prepare_data.prepare('mine', input=str(text), out_dir=str(tmp_path / 'linked'), quiet=True)
    assert os.path.islink(tmp_path / 'linked' / 'mine') and sorted(os.listdir(big)) == ['mine']
    assert sorted(os.listdir(big / 'mine')) == ['meta.json', 'train.bin', 'val.bin']


def test_the_offline_hint_repeats_the_command_with_its_tokenizer_and_folder(tmp_path):
    import prepare_data
    from test_prepare_data import closed_port
    out = tmp_path / 'elsewhere'
    with pytest.raises(prepare_data.DataError) as e:
        prepare_data.prepare('wikitext103', tokenizer='byte', out_dir=str(out), url=f'http://127.0.0.1:{closed_port()}',
                             quiet=True)
    assert f'python prepare_data.py wikitext103 --tokenizer byte --out_dir {out} --input FILE' in str(e.value)


def test_sample_and_eval_take_a_sigterm_as_a_ctrl_c(tools_workspace):
    # a scheduler's SIGTERM while sample.py generates (exit 143, as train.py's) and while eval.py sweeps: one line
    import signal
    import subprocess
    import types
    d = tools_workspace
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONUNBUFFERED': '1'}
    for cmd, ready, say, code in (
            (['sample.py', f'--out_dir={d}/run', '--num_samples=100000', '--max_new_tokens=8'], '-----', 'interrupted',
             143),
            (['-m', 'tools.eval', f'--out_dir={d}/parcae', '--sweep=num_recur=1..60', f'--out={d}/sig'], 'num_recur',
             'interrupted (a sweep keeps the points', 130)):
        p = subprocess.Popen([sys.executable, *cmd], cwd=conftest.CHECKOUT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
        interrupt_when(p, ready, signal.SIGTERM)
        one_line(types.SimpleNamespace(returncode=p.returncode, stderr=p.stderr.read()), say, code=code)


def test_stop_on_signals_runs_its_hook_then_stops_as_ctrl_c(tmp_path):
    # tools.results' use of it: the train.py children it started are stopped before it stops itself
    import signal
    import subprocess
    code = ("import subprocess, sys, time\n"
            "from configurator import stop_on_signals\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
            "stop_on_signals(lambda: child.terminate())\n"
            "try:\n    print('ready', flush=True)\n    time.sleep(120)\n"
            "except KeyboardInterrupt as e:\n    print('stopped by', e, 'child', child.wait(timeout=30), flush=True)\n")
    p = subprocess.Popen([sys.executable, '-c', code], cwd=conftest.CHECKOUT, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == 'ready'
    p.send_signal(signal.SIGTERM)
    assert p.stdout.read().strip() == f'stopped by SIGTERM child {-signal.SIGTERM}'
    p.wait(timeout=60)
