"""
The GPU check: tools.bench's measurements of every model at its paper shape, and train.py itself.

    python -m tools.gpu_check                        # the same as python -m tools.bench --gpu_check
    python -m tools.gpu_check --models=gpt,parcae --batch_size=8
    echo GO | python -m tools.gpu_check --gpu_check_worker=config/fon_d256_t1.py    # one model's worker alone

Everything the GPU path needs, in one command meant for one device call (343 s on an H200 with
--warm_jobs=6). Every model at a paper shape (GPU_CHECK's configs, batch and length as the config says,
in the config's own dtype; config files given on the command line replace them) runs in its own worker
process: the workers compile and warm up at once (warm_jobs at a time, sharing inductor's on-disk
caches), then each, alone on the device, takes `iters` timed compiled training steps (each optimizer
timed on its own: Muon's share shows), one profiled step whose aten ops name the attention kernel that
ran, and the incremental decode (KV cache, O(1) state) against the full forward at two context lengths.
Dynamo's graphs and the most versions of one function are counted (the recompile limit, 8, stops that
model: a recompile storm). Then train.py itself: the GPT config at its own micro-batch on min(2, GPUs)
ranks (nccl), two micro-steps each, an eval and a save every 2 iterations, its peak memory from its log,
and the same run stopped halfway and resumed against the uninterrupted one. On a machine without CUDA
the same runs at TINY_SHAPE in float32 (the test suite runs it with --backend=eager). Exits 1 when a
check fails.

The options are tools.bench's (--warm_jobs, --backend, --warmup, --iters, --decode_iters, --device,
--seed, --batch_size, --block_size, --models); tools.bench --gpu_check runs this command.
"""
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import configurator
from configurator import ConfigError
from models import build_model, model_classes, peak_flops, resolve_device, use_tf32
from tools.bench import (ROOT, bench_decode, bench_train, compile_stats, file_configs, read_options, registered,
                         table, tiny)

# the GPU check's models at a paper shape, the reference first (a CPU runs them at tools.bench.TINY_SHAPE)
GPU_CHECK = ('gpt_140m', 'parcae_140m', 'textnca_hier', 'fon_d256_t1', 'fon_mamba2_d256', 'workspace_medium')


# ----------------------------------------------------------------------------- the check
@torch.no_grad()
def decode_gap(model, x):
    """Largest |decode_step logits - forward logits| over the positions of x (float32, no TF32)."""
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        full = model(x)[0]
        state, gap = model.decode_init(x.shape[0], x.device), 0.0
        for t in range(x.shape[1]):
            logits, state = model.decode_step(x[:, t], state)
            gap = max(gap, (logits.float() - full[:, t].float()).abs().max().item())
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    return gap


def check_model(name, cfg, opt, dev, lengths, go=lambda: None):
    """One row of the GPU check, in the config's own dtype: the decode against the forward, then
    bench_train's compiled steps with their details, dynamo's counts, and the decode speed."""
    dev, ptdtype, ctx = resolve_device(dev, cfg['dtype'])
    if dev.startswith('cuda'):
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = use_tf32(cfg, ptdtype)
    row = {'dtype': str(ptdtype).split('.')[-1]}
    if hasattr(model_classes(cfg['model'])[0], 'decode_step'):
        torch.manual_seed(opt['seed'])
        model = build_model(cfg['model'], cfg).to(dev).eval()
        row['decode_gap'] = decode_gap(model, torch.randint(model.config.vocab_size, (1, min(16, cfg['block_size'])), device=dev))
        del model
    stats = compile_stats()
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        row.update(bench_train(name, cfg, {**opt, 'compile': True}, dev, ptdtype, ctx, peak_flops(dev, ptdtype), go,
                               detail=True))
    row.update(stats())
    if 'decode_gap' in row:
        decode = bench_decode(name, cfg, opt, dev, ctx, lengths)
        row['decode_ms'] = [r['ms_per_token'] for r in decode]
        row['state_mb'] = [r['state_mb'] for r in decode]
    if not math.isfinite(row['loss']):
        row['error'] = f"loss {row['loss']}"
    elif row.get('decode_gap', 0.0) > 1e-2:
        row['error'] = f"decode differs from forward by {row['decode_gap']:.3g}"
    return row


def check_worker(path, opt):
    """`--gpu_check_worker=CONFIG`: one model of the GPU check in its own process. It compiles and
    warms up while the other workers do, says READY, and measures when the parent writes GO."""
    cuda = resolve_device(opt['device'], 'float32')[0].startswith('cuda')
    name, cfg = file_configs([path], opt)[0]
    cfg = cfg if cuda else {**tiny(cfg), 'dtype': 'float32'}
    lengths = (128, 512) if cuda else (8, 24)

    def go():
        print('READY', flush=True)
        sys.stdin.readline()
    try:
        rec = check_model(name, cfg, opt, opt['device'], lengths, go)
    except torch.OutOfMemoryError:
        rec = {'error': 'out of memory (try --batch_size=8)'}
    except Exception as e:   # a recompile storm, a kernel that does not exist...: the row says which
        rec = {'error': f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}"}
    rec = {'model': name, 'arch': cfg['model'], 'batch_size': cfg['batch_size'], 'block_size': cfg['block_size'], **rec}
    print('RESULT ' + json.dumps(rec), flush=True)


def run_workers(paths, opt, jobs):
    """Every config in its own worker, at most `jobs` compiling at once (inductor's caches on disk
    are shared), then each measured alone, in order. Returns their records."""
    args = [f'--{k}={opt[k]}' for k in ('backend', 'warmup', 'iters', 'decode_iters', 'device', 'seed')]
    args += [f'--{k}={opt[k]}' for k in ('batch_size', 'block_size') if opt[k] is not None]
    env = {**os.environ, 'PYTHONPATH': ROOT}
    logs = tempfile.TemporaryDirectory()
    procs, records = [], {}

    def start(path):
        err = open(os.path.join(logs.name, f'{len(procs)}.err'), 'w+')   # a file: a full pipe would stall the worker
        p = subprocess.Popen([sys.executable, '-m', 'tools.gpu_check', f'--gpu_check_worker={path}', *args], cwd=ROOT,
                             env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
        procs.append((path, p, err))

    def next_line(p, *wanted):
        line = p.stdout.readline()
        while line and not line.startswith(wanted):
            line = p.stdout.readline()
        return line
    queue, first = list(paths), []
    while queue and len(procs) < jobs:
        start(queue.pop(0))
    k = 0
    while k < len(procs):   # a worker that is ready holds no more than its weights: start the next
        first.append(next_line(procs[k][1], 'READY', 'RESULT '))
        if queue:
            start(queue.pop(0))
        k += 1
    for (path, p, err), line in zip(procs, first):   # then each measures alone, in order
        if line.startswith('READY'):
            p.stdin.write('GO\n')
            p.stdin.flush()
            line = next_line(p, 'RESULT ')
        p.wait()
        err.seek(0)
        name = os.path.splitext(os.path.basename(path))[0]
        if line.startswith('RESULT '):
            records[path] = json.loads(line[len('RESULT '):])
        else:
            tail = [ln for ln in err.read().strip().splitlines() if ln.strip()][-1:] or [f'exit {p.returncode}']
            records[path] = {'model': name, 'arch': '?', 'batch_size': 0, 'block_size': 0, 'error': tail[0][:200]}
        err.close()
        r = records[path]   # each model's figures as it finishes: a check stopped short still reports these
        print(f"{name}: {r.get('error') or 'ok'}" + (f", {r['ms_per_step']:.1f} ms/step, MFU {100 * r['mfu']:.1f}%, "
              f"warm-up {r['warmup_s']:.0f} s" if 'mfu' in r else ''), file=sys.stderr, flush=True)
    logs.cleanup()
    return [records[p] for p in paths]


def train_py_check(work, cuda, opt):
    """train.py itself: the GPT config at its own micro-batch on min(2, GPUs) ranks (gloo, one rank,
    tiny on a CPU), two micro-steps each, an eval and a save every 2 iterations; then the same run
    stopped at iteration 2 and resumed, whose losses must continue the uninterrupted run's
    (exactly on a CPU; on CUDA within 1e-2, as atomics in some backward kernels are not
    deterministic even between two uninterrupted runs)."""
    ranks = min(2, torch.cuda.device_count()) if cuda else 1
    shape = [os.path.join(ROOT, 'config', 'gpt_140m.py'), '--dataset=synthetic', '--vocab_size=32768'] if cuda else \
        ['--device=cpu', '--n_layer=1', '--n_embd=32', '--n_head=2', '--block_size=32', '--batch_size=4']
    common = [*shape, f'--data_dir={work}', '--eval_interval=2', '--eval_iters=1', '--log_interval=1',
              f'--gradient_accumulation_steps={2 * ranks}', '--warmup_iters=0', '--lr_decay_iters=4',
              f'--compile={cuda}']   # the schedule of a 4-iteration run, in the run stopped at 2 too
    env = {**os.environ, 'NCCL_DEBUG': 'VERSION', 'OMP_NUM_THREADS': '1'}
    launcher = [sys.executable, '-m', 'torch.distributed.run', '--standalone', f'--nproc_per_node={ranks}',
                os.path.join(ROOT, 'train.py')]
    rec = {'model': f'train.py x {ranks} rank(s)', 'backend': 'nccl' if cuda else 'gloo', 'ranks': ranks}
    out = ''
    for args in (['--max_iters=4', f'--out_dir={work}/a'], ['--max_iters=2', f'--out_dir={work}/b'],
                 ['--max_iters=4', f'--out_dir={work}/b', '--init_from=resume']):
        p = subprocess.run(launcher + common + args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        out += p.stdout + p.stderr
        if p.returncode != 0:
            rec['error'] = f"exit {p.returncode}: {(p.stderr.strip().splitlines() or [''])[-1][:200]}"
            return rec

    def losses(run):
        return {r['iter']: r for r in (json.loads(line) for line in open(os.path.join(work, run, 'log.jsonl')))
                if r['kind'] == 'train'}
    a, b = losses('a'), losses('b')
    rec['loss'] = a[3]['loss']
    rec['ms_per_iter'] = statistics.median(r['ms'] for k, r in a.items() if k > 0)
    rec['peak_mem_gb'] = max((r.get('peak_mem_gb', 0) for r in a.values()), default=0)
    rec['resume_gap'] = max(abs(a[k]['loss'] - b[k]['loss']) for k in (2, 3))
    if rec['resume_gap'] > (1e-2 if cuda else 0.0):
        rec['error'] = f"the resumed run's losses differ from the uninterrupted run's by {rec['resume_gap']:.3g}"
    elif cuda and 'NCCL version' not in out:
        rec['error'] = 'no NCCL version line: nccl was not used'
    elif not math.isfinite(rec['loss']):
        rec['error'] = f"loss {rec['loss']}"
    return rec


def gpu_check(paths, opt, dev):
    """The whole check (module docstring): the models in workers, then train.py itself."""
    cuda = dev.startswith('cuda')
    t_start = time.time()
    records = run_workers(paths, opt, opt['warm_jobs'])
    with tempfile.TemporaryDirectory() as work:
        trainer = train_py_check(work, cuda, opt)
    ref = next((r for r in records if 'mfu' in r and r['arch'] == 'gpt'), None)

    def val(key, fmt):
        return lambda r: fmt(r[key]) if key in r else '-'
    dname = torch.cuda.get_device_name(dev) if cuda else 'CPU, tiny shapes'
    print(f"GPU check: {dname}, torch {torch.__version__}, backend {opt['backend']}, {time.strftime('%Y-%m-%d')}")
    print(table(records, [
        ('model', lambda r: r['model']), ('params', val('params', lambda v: f"{v / 1e6:.1f}M")),
        ('dtype', val('dtype', str)), ('batch x T', lambda r: f"{r['batch_size']} x {r['block_size']}"),
        ('ms/step', val('ms_per_step', lambda v: f"{v:.1f}")), ('tokens/s', val('tokens_per_s', lambda v: f"{v:,.0f}")),
        ('MFU', val('mfu', lambda v: f"{100 * v:.1f}%")),
        ('MFU / GPT', val('mfu', lambda v: f"{v / ref['mfu']:.2f}x" if ref else '-')),
        ('optimizer ms', val('optimizer_ms', lambda v: ' + '.join(f'{x:.1f}' for x in v))),
        ('peak GB', val('peak_mem_mb', lambda v: f"{v / 1024:.2f}")), ('loss', val('loss', lambda v: f"{v:.3f}")),
        ('warm-up s', val('warmup_s', lambda v: f"{v:.0f}")), ('graphs', val('graphs', str)),
        ('most versions', val('max_versions', str)), ('attention kernel', val('sdpa', lambda v: ', '.join(v) or 'none')),
        ("decode ms/token (2 contexts)", val('decode_ms', lambda v: ' / '.join(f'{x:.2f}' for x in v))),
        ('decode state MB', val('state_mb', lambda v: ' / '.join(f'{x:.2f}' for x in v))),
        ('decode - forward', val('decode_gap', lambda v: f"{v:.1e}")),
        ('check', lambda r: r.get('error', 'ok'))]))
    print(f"{trainer['model']} ({trainer['backend']}): " + (trainer['error'] if 'error' in trainer else
          f"{trainer['ms_per_iter']:.0f} ms/iter, peak {trainer['peak_mem_gb']:.2f} GB, final loss {trainer['loss']:.3f}, "
          f"resumed run - uninterrupted run {trainer['resume_gap']:.1e}: ok"))
    print(f"targets (H100-class, bf16, compiled): GPT >= 40% MFU, every other model >= GPT's MFU / 1.5; "
          f"took {time.time() - t_start:.0f} s")
    return records + [trainer]


def main(argv):
    """The check of the command line's config files (default: GPU_CHECK's), or one worker of it."""
    try:
        files, opt, (dev, _, _), _ = read_options(argv)
        if opt['gpu_check_worker']:
            return check_worker(opt['gpu_check_worker'], opt)
        keep = registered(opt)
        files = files or [os.path.join(ROOT, 'config', f'{c}.py') for c in GPU_CHECK]
        files = [f for f, (_, c) in zip(files, file_configs(files, opt)) if c['model'] in keep]
        return gpu_check(files, opt, dev)
    except ConfigError as e:
        configurator.fail(e)


if __name__ == '__main__':
    sys.exit(1 if any('error' in r for r in main(sys.argv[1:]) or []) else 0)
