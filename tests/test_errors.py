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
import sys

import numpy as np
import pytest
import torch

from conftest import ROOT, make_char_dataset, run_script

TINY = ['--dataset=tiny', '--n_layer=1', '--n_head=2', '--n_embd=16', '--block_size=16', '--batch_size=4',
        '--eval_iters=1', '--compile=False', '--max_iters=0']


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
        ([f'--data_dir={d}/afile/data', '--dataset=synthetic'], 'cannot write the synthetic data under data_dir'),
    ])]
    if not torch.cuda.is_available():
        train.append(('train.py', [data, *TINY, '--device=cuda'], "device 'cuda': this machine has no CUDA GPU"))
    if not torch.backends.mps.is_available():
        train.append(('train.py', [data, *TINY, '--device=mps'], "device 'mps': MPS (Apple GPU) is not available"))
    train += [('train.py', [data, *TINY, *args], msg) for args, msg in [
        ([run], 'holds a trained run: continue it with --init_from=resume, start this run in another --out_dir, '
                'or replace it (and its log) with --overwrite=True'),
        ([run, '--eval_only=True'], 'would evaluate a fresh model, not the trained'),
        ([run, '--init_from=resume', '--n_embd=32', '--block_size=8'],
         "these settings differ from it: n_embd=32 (checkpoint: 16), block_size=8 (checkpoint: 16)"),
        ([f'--out_dir={d}/absent', '--init_from=resume'], "init_from='resume' but there is no checkpoint at"),
        ([f'--out_dir={d}/truncated', '--init_from=resume'], 'truncated/ckpt.pt is unreadable'),
        ([f'--out_dir={d}/empty', '--init_from=resume'], 'empty/ckpt.pt is unreadable (0 bytes'),
        ([f'--out_dir={d}/garbage', '--init_from=resume'], 'garbage/ckpt.pt is unreadable'),
        ([f'--out_dir={d}/foreign', '--init_from=resume'], 'is not a train.py checkpoint (it lacks model, model_name'),
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
    ]] + [('eval.py', args, msg) for args, msg in [
        ([f'--out_dir={d}/truncated'], 'is unreadable'),
        ([f'--out_dir={d}/garbage'], 'is unreadable'),
        ([f'--out_dir={d}/absent'], 'no checkpoint at'),
        ([f'{d}/latin1.txt'], 'is neither'),
        (['--compare', f'{d}/run', f'{d}/absent'], 'is not a run folder'),
        (['--compare', f'{d}/run', f'{d}/badrun'], 'config.json is not valid JSON'),
        (['--compare', f'{d}/run', f'{d}/truncated'], 'is unreadable'),
    ]]
    return train + sample + evals


def drive(table_path):
    """Runs each case of the table in a forked child; prints [exit code, stderr] per case."""
    import sample
    from conftest import train_script
    from tools import eval as evaluate
    mains = {'train.py': train_script().main, 'sample.py': sample.main, 'eval.py': evaluate.main}
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
    before = {p: digest(p) for p in (d / 'run' / 'ckpt.pt', d / 'run' / 'log.jsonl')}
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
    for name in ('absent', 'new'):
        assert not os.path.exists(d / name)


if __name__ == '__main__':
    sys.path.insert(0, ROOT)
    drive(sys.argv[1])
