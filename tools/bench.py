"""
Speed and memory of every model, side by side, measured one after the other in one process.

    python -m tools.bench                                        # every registered model, shared CPU shape
    python -m tools.bench --models=gpt,parcae --device=cuda --dtype=bfloat16 --compile=True
    python -m tools.bench config/fon_tf_d256.py config/fon_d256_t1.py --batch_size=16   # first = reference
    python -m tools.bench --decode=True --max_context=2048       # per-token decode latency, state memory
    python -m tools.bench --json=bench.json                      # the records, as a JSON list
    python -m tools.bench --gpu_check                            # the one-shot check of the GPU path (below)

Training step = forward + backward + the optimizer step train.py would build (configure_optimizers:
AdamW at the shared shape; a config file's own optimizer, e.g. Muon + AdamW for Parcae's Table 20),
timed after `warmup` steps as the median of `iters` steps on one fixed random batch. ratio =
ms_per_step / the reference's (GPT in --models mode when measured, else the first model);
flops_ratio likewise for flops_per_token. Achieved FLOP/s = flops_per_token(T) * B * T / step
time; MFU against peak_flops: the spec sheet's dense bf16 peak on a known CUDA device, else
the measured matmul peak of this machine (measure_peak_flops), so MFU means something on a CPU.

Peak memory. CUDA: torch.cuda.max_memory_allocated over the timed steps. CPU (no allocator
statistics): parameters + gradients + optimizer state + every tensor autograd saves for backward
in one step (torch.autograd.graph.saved_tensors_hooks, counted once per storage, parameters
excluded); short-lived temporaries inside an op are not counted, so it is a lower bound that ranks
models by what they keep alive.

The shared shape (--models mode): vocab_size, block_size, n_head and depth n_layer as given (Parcae
splits the depth into prelude / recurrent block / coda, L/3 each, at least 1 / L-2 / 1; TextNCA and
the workspace keep their own structure: 3 stages, 4 rounds of one block). GPT is the reference at
width n_embd. Every other model is sized to GPT's parameter count: its width is the multiple of
2 * n_head that comes closest (d_ff at the model's own ratio to the width), then d_ff, where the
model has one, is solved for the exact count (rounded to a multiple of 8). The params column
shows what that reached.

Decode (--decode=True): every model with decode_init/decode_step (GPT: its KV cache), batch 1,
fed a random sequence token by token; at each context length the state's size (tensor storage held
by the state, counted once) and the median latency of the next decode_iters tokens. block_size is
raised to the longest context so learned position tables reach it.

GPU check (--gpu_check, --gpu_check_worker): tools/gpu_check.py, which this command becomes (its
docstring says what it checks).
"""
import collections
import json
import os
import re
import statistics
import sys
import time

import torch

import configurator
import data
import train
from configurator import ConfigError, check, parse_args
from models import MODELS, build_model, model_classes, model_fields, peak_flops, resolve_device, use_tf32
from train import configure_optimizers, resolve_config
from tools.report import write_text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # the repo

# ----------------------------------------------------------------------------- defaults
models = ''              # 'gpt,parcae,...'; '' = every registered model that imports
batch_size = None        # None: 4 (shared shape) or the config file's
block_size = None        # None: 256 (shared shape) or the config file's
n_embd = 256             # the shared shape (GPT's width)
n_head = 4
n_layer = 4
vocab_size = 4096
warmup = 2
iters = 5
compile = None           # None: on for CUDA (always on with gpu_check)
backend = 'inductor'     # torch.compile backend; 'eager' traces and counts graphs without code generation
dtype = 'auto'
device = 'auto'
json_path = ''           # --json=PATH
decode = False
contexts = (512, 1024, 2048, 4096, 8192)
max_context = None       # None: 8192 on CUDA, 2048 on CPU
decode_iters = 8
gpu_check = False        # tools.gpu_check runs the command (its options are these)
gpu_check_worker = ''    # internal: one model of the GPU check (a config path)
warm_jobs = 3            # GPU check: models compiling at once
seed = 1337
DEFAULTS = configurator.defaults_of(globals())


# the shape a CPU runs the GPU check (tools.gpu_check) and the compile tests at
TINY_SHAPE = {'n_embd': 32, 'n_head': 2, 'head_dim': 16, 'd_ff': 64, 'slot_dim': 16,
              'vocab_size': 64, 'block_size': 32, 'batch_size': 4}


# ----------------------------------------------------------------------------- model configs
def tiny(cfg):
    """cfg with TINY_SHAPE's values for the fields the model has. The model's structure (its depth,
    windows and loop) stays as the config sets it; a config's micro_batch_size is for its own batch."""
    fields = model_fields(cfg['model'])
    return {**cfg, 'micro_batch_size': None,
            **{k: v for k, v in TINY_SHAPE.items() if k in fields or k in ('vocab_size', 'block_size', 'batch_size')}}


def params_of(name, cfg):
    with torch.device('meta'):
        return build_model(name, cfg).num_params()


def structure(name, opt):
    """The settings that give a model its structure at the shared shape (for Parcae, how the depth
    splits into prelude, recurrent block and coda); everything else keeps the model's defaults."""
    L = opt['n_layer']
    if name == 'parcae':
        p = max(1, L // 3)
        return {'n_prelude': p, 'n_recur_layers': max(1, L - 2 * p), 'n_coda': p}
    return {}


def size_to(name, cfg, target, step):
    """Sizes a model to `target` parameters: the width (a multiple of step) whose count comes
    closest, then refine() for the exact count."""
    fields = model_fields(name)
    if 'n_embd' not in fields:
        return cfg
    d0_ff, d0 = fields.get('d_ff'), fields['n_embd']

    def at(d, dff=None):
        c = {**cfg, 'n_embd': d}
        if 'd_ff' in fields:
            c['d_ff'] = dff if dff is not None else (None if d0_ff is None else max(8, round(d0_ff * d / d0 / 8) * 8))
        return c

    memo = {}

    def count(k):  # parameters at width k * step, None where the model rejects that width
        if k not in memo:
            try:
                memo[k] = params_of(name, at(k * step))
            except (ValueError, AssertionError, TypeError, RuntimeError, ConfigError):
                memo[k] = None
        return memo[k]

    def accepted(k, up):  # the nearest width the model accepts (Mamba2: d_inner a multiple of headdim)
        while 1 <= k <= top and count(k) is None:
            k += 1 if up else -1
        return k if 1 <= k <= top else None
    top = 4 * cfg['n_embd'] // step
    lo, hi = 1, top
    while lo < hi:   # the count grows with the width: the first accepted width at or above target
        mid = (lo + hi) // 2
        k = accepted(mid, True)
        if k is not None and count(k) >= target:
            hi = mid
        else:
            lo = mid + 1
    best = None
    for k in {accepted(lo, True), accepted(lo - 1, False)} - {None}:   # the widths either side
        c = refine(name, at(k * step), fields, target)
        gap = abs(params_of(name, c) - target)
        if best is None or gap < best[0]:
            best = (gap, c)
    return cfg if best is None else best[1]


def refine(name, cfg, fields, target):
    """Solves a size knob that the count is linear in (d_ff, else Mamba2's d_state) for the exact
    target, rounded to a multiple of 8, within a factor 4 of its value at this width."""
    knob = next((k for k in ('d_ff', 'd_state') if k in fields), None)
    if knob is None:
        return cfg
    v0 = cfg.get(knob) or fields[knob] or 4 * cfg['n_embd']
    p0, p1 = params_of(name, {**cfg, knob: v0}), params_of(name, {**cfg, knob: v0 + 64})
    v = round((v0 + (target - p0) * 64 / (p1 - p0)) / 8) * 8 if p1 != p0 else v0
    return {**cfg, knob: v} if max(8, v0 / 4) <= v <= 4 * v0 else cfg


def shared_configs(names, opt):
    base = {**train.DEFAULTS, 'block_size': opt['block_size'] or 256, 'batch_size': opt['batch_size'] or 4,
            'vocab_size': opt['vocab_size'], 'n_embd': opt['n_embd'], 'n_head': opt['n_head'],
            'n_layer': opt['n_layer'], 'dropout': 0.0, 'optimizer': 'adamw'}
    target = params_of('gpt', base)
    out = []
    for name in names:
        cfg = {**base, 'model': name, **structure(name, opt)}
        if name != 'gpt':
            cfg = size_to(name, cfg, target, 2 * opt['n_head'])
        out.append((name, cfg))
    return out


def file_configs(paths, opt):
    """A config file resolved as train.py resolves it, with --batch_size / --block_size applied."""
    out = []
    for path in paths:
        extra = [f'--{k}={opt[k]}' for k in ('batch_size', 'block_size') if opt[k] is not None]
        cfg = resolve_config([path] + extra)
        if cfg['vocab_size'] is None:
            meta = data.read_meta(cfg)
            if meta is not None:
                cfg['vocab_size'] = data.dataset_vocab(cfg, meta)[0]
            else:
                cfg['vocab_size'] = model_fields(cfg['model'])['vocab_size']
        out.append((os.path.splitext(os.path.basename(path))[0], cfg))
    return out


def registered(opt):
    names = [n for n in opt['models'].split(',') if n] if opt['models'] else list(MODELS)
    ok = []
    for n in names:
        try:
            model_classes(n)
            ok.append(n)
        except ConfigError:
            raise
        except (ImportError, AttributeError) as e:
            if opt['models']:
                raise ConfigError(f"model '{n}' does not import: {e}")
            print(f"skipping {n}: {e}", file=sys.stderr)
    if 'gpt' in ok:   # the reference first
        ok.remove('gpt')
        ok.insert(0, 'gpt')
    return ok


# ----------------------------------------------------------------------------- measurements
def storage_bytes(obj, seen=None):
    """Bytes of tensor storage reachable from obj (dicts, lists, tuples), each storage once."""
    seen = set() if seen is None else seen
    if isinstance(obj, torch.Tensor):
        s = obj.untyped_storage()
        if s.data_ptr() in seen:
            return 0
        seen.add(s.data_ptr())
        return s.nbytes()
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(storage_bytes(o, seen) for o in obj)
    return 0


def cpu_step_bytes(model, opts, loss_fn):
    """The bytes one CPU training step keeps alive: parameters, gradients, optimizer state and the
    tensors autograd saves for backward (the module docstring says what this leaves out)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = {}

    def pack(t):
        try:
            key, n = t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()
        except (RuntimeError, NotImplementedError):  # a tensor without a plain storage: count it whole
            key, n = id(t), t.numel() * t.element_size()
        if key not in params:
            saved[key] = n
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_fn()
    loss.backward()
    for o in opts:
        o.step()
        o.zero_grad(set_to_none=True)
    p = sum(q.numel() * q.element_size() for q in model.parameters())
    g = sum(q.numel() * q.element_size() for q in model.parameters() if q.requires_grad)
    state = storage_bytes([list(o.state.values()) for o in opts])
    return p + g + state + sum(saved.values())


def bench_train(name, cfg, opt, dev, ptdtype, ctx, peak, go=lambda: None, detail=False):
    """Times the training steps of one model. It runs `warmup` steps first (with compile, mostly
    compilation), then calls go() (the GPU check lets one model measure at a time), then times `iters`
    steps. detail: each optimizer's step is also timed on its own, and one profiled step names the
    attention kernel (the GPU check's extra columns). Returns the model's record."""
    device_type = 'cuda' if dev.startswith('cuda') else 'cpu'
    sync = torch.cuda.synchronize if device_type == 'cuda' else (lambda: None)
    torch.manual_seed(opt['seed'])
    model = build_model(cfg['model'], cfg).to(dev)
    model.train()
    opts = configure_optimizers(model, cfg, device_type)
    use_compile = opt['compile'] if opt['compile'] is not None else device_type == 'cuda'
    run = torch.compile(model, backend=opt['backend']) if use_compile else model
    B, T, V = cfg['batch_size'], cfg['block_size'], model.config.vocab_size
    g = torch.Generator().manual_seed(opt['seed'])
    x, y = (torch.randint(V, (B, T), generator=g).to(dev) for _ in range(2))

    def loss_fn(m=run):
        with ctx:
            return m(x, y)[1]

    def step():
        return train_step(loss_fn, opts, sync if detail else (lambda: None))
    warmup_s, times, opt_times, loss = time_steps(step, opt, dev, sync, go)
    if device_type == 'cuda':
        mem = torch.cuda.max_memory_allocated(dev)
    else:
        mem = cpu_step_bytes(model, opts, lambda: loss_fn(model))
    s = statistics.median(times)
    fpt = model.flops_per_token(T)
    rec = {'model': name, 'arch': cfg['model'], 'params': model.num_params(), 'flops_per_token': fpt,
           'ms_per_step': 1000 * s, 'tokens_per_s': B * T / s, 'peak_mem_mb': mem / 2 ** 20,
           'flops_per_s': fpt * B * T / s, 'mfu': fpt * B * T / s / peak, 'batch_size': B, 'block_size': T,
           'n_embd': getattr(model.config, 'n_embd', None), 'd_ff': getattr(model.config, 'd_ff', None),
           'loss': loss.item(), 'warmup_s': warmup_s}
    if detail:
        acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if device_type == 'cuda' else [])
        with torch.profiler.profile(activities=acts) as prof:
            step()
        rec['sdpa'] = attention_kernels(prof.events())
        rec['optimizer_ms'] = [1000 * statistics.median(c) for c in zip(*opt_times)]
    del model, run, opts
    if device_type == 'cuda':
        torch.cuda.empty_cache()
    return rec


def train_step(loss_fn, opts, sync):
    """One training step: forward, backward, then each optimizer's step and zero_grad. Returns the
    loss and each optimizer step's seconds (sync() before and after each, to time it on its own)."""
    loss = loss_fn()
    loss.backward()
    opt_s = []
    for o in opts:
        sync()
        t0 = time.perf_counter()
        o.step()
        sync()
        opt_s.append(time.perf_counter() - t0)
        o.zero_grad(set_to_none=True)
    return loss.detach(), opt_s


def time_steps(step, opt, dev, sync, go):
    """`warmup` steps, go(), then `iters` timed steps (CUDA's peak memory counted over those alone).
    Returns the warmup's seconds, each timed step's seconds and its optimizers' seconds, and the
    last loss."""
    cuda = dev.startswith('cuda')
    t0 = time.perf_counter()
    for _ in range(opt['warmup']):
        step()
    sync()
    warmup_s = time.perf_counter() - t0
    if cuda:
        torch.cuda.empty_cache()   # a model that waits for go() holds its weights, not its peak
    go()
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    times, opt_times = [], []
    for _ in range(opt['iters']):
        sync()
        t0 = time.perf_counter()
        loss, opt_s = step()
        sync()
        times.append(time.perf_counter() - t0)
        opt_times.append(opt_s)
    return warmup_s, times, opt_times, loss


@torch.no_grad()
def bench_decode(name, cfg, opt, dev, ctx, lengths):
    sync = torch.cuda.synchronize if dev.startswith('cuda') else (lambda: None)
    torch.manual_seed(opt['seed'])
    model = build_model(cfg['model'], {**cfg, 'block_size': max(lengths) + opt['decode_iters'] + 1}).to(dev)
    model.eval()
    V = model.config.vocab_size
    toks = torch.randint(V, (max(lengths) + opt['decode_iters'] + 1, 1), device=dev)
    state, pos, rows = model.decode_init(1, dev), 0, []
    for L in sorted(lengths):
        with ctx:
            while pos < L:
                _, state = model.decode_step(toks[pos], state)
                pos += 1
        mem = storage_bytes(state)
        times = []
        for _ in range(opt['decode_iters']):
            sync()
            t0 = time.perf_counter()
            with ctx:
                _, state = model.decode_step(toks[pos], state)
            sync()
            times.append(time.perf_counter() - t0)
            pos += 1
        rows.append({'model': name, 'arch': cfg['model'], 'params': model.num_params(), 'context': L,
                     'ms_per_token': 1000 * statistics.median(times), 'state_mb': mem / 2 ** 20})
        print(f"{name}: context {L}: {rows[-1]['ms_per_token']:.2f} ms/token, state {rows[-1]['state_mb']:.2f} MB",
              file=sys.stderr, flush=True)   # the prefill to a long context takes minutes on a CPU
    return rows


# ----------------------------------------------------------------------------- what a compiled step ran
def compile_stats():
    """Starts counting dynamo's work afresh (its caches emptied); returns a function that reads
    the graphs compiled, the graph breaks and the most versions compiled of any one function
    (the number the recompile limit bounds)."""
    torch._dynamo.reset()   # also drops earlier callbacks
    torch._dynamo.utils.counters.clear()
    versions = collections.defaultdict(set)
    torch._dynamo.on_compile_start(lambda a: versions[str(a.compile_id).split('/')[0]].add(str(a.compile_id)))

    def read():
        c = torch._dynamo.utils.counters
        return {'graphs': c['stats']['unique_graphs'], 'graph_breaks': sum(c['graph_break'].values()),
                'max_versions': max(map(len, versions.values()), default=0)}
    return read


SDPA_OPS = {'flash': 'FLASH_ATTENTION', 'efficient': 'EFFICIENT_ATTENTION', 'cudnn': 'CUDNN_ATTENTION',
            'math': 'MATH', 'flex': 'FLEX_ATTENTION'}


def attention_kernels(events):
    """The attention kernels a profiled training step ran, read off the aten ops it called
    (aten::_scaled_dot_product_flash_attention, ..._for_cpu, _efficient_, _cudnn_, _math, flex)."""
    found = set()
    for e in events:
        m = re.search(r'_scaled_dot_product_(flash|efficient|cudnn)_attention|_scaled_dot_product_attention_(math)|(flex)_attention', e.name)
        if m:
            found.add(SDPA_OPS[next(g for g in m.groups() if g)])
    return sorted(found)


# ----------------------------------------------------------------------------- main
def split_argv(argv):
    """Splits the command line into the config files (the positional arguments) and --key=value
    options. --models, --json and --contexts may take their value after a space, --decode,
    --compile and --gpu_check alone mean True, and --json is short for --json_path."""
    files, args, i = [], [], 0
    while i < len(argv):
        a = argv[i]
        if not a.startswith('--'):
            files.append(a)
        elif a in ('--models', '--json', '--contexts') and i + 1 < len(argv) and not argv[i + 1].startswith('--'):
            args.append(f'{a}={argv[i + 1]}')
            i += 1
        elif a in ('--decode', '--compile', '--gpu_check'):
            args.append(a + '=True')
        else:
            args.append(a)
        i += 1
    return files, [a.replace('--json=', '--json_path=', 1) for a in args]


def table(rows, cols):
    lines = ['| ' + ' | '.join(h for h, _ in cols) + ' |', '|' + '---|' * len(cols)]
    for r in rows:
        lines.append('| ' + ' | '.join(f(r) for _, f in cols) + ' |')
    return '\n'.join(lines)


def read_options(argv):
    """The config files and the checked options of a command line, the device (dev, ptdtype, ctx)
    and the decode contexts up to max_context; ConfigError where they do not fit together."""
    files, args = split_argv(argv)
    given = parse_args(args)
    opt = {**DEFAULTS, **check(given, DEFAULTS)}
    if opt['models'] and files:
        raise ConfigError("give either --models or config files, not both")
    least = {'iters': 1, 'decode_iters': 1, 'warm_jobs': 1, 'warmup': 0, 'n_layer': 1, 'n_head': 1, 'n_embd': 1,
             'vocab_size': 2, 'batch_size': 1, 'block_size': 1, 'max_context': 1}   # a median needs one timed step
    for k, lo in least.items():
        if opt[k] is not None and (not isinstance(opt[k], int) or isinstance(opt[k], bool) or opt[k] < lo):
            raise ConfigError(f"{k} must be an integer >= {lo}" + (" (or None: 8192 on CUDA, 2048 on CPU)"
                              if k == 'max_context' else "") + f", got {opt[k]!r}")
    if opt['json_path'] and os.path.isdir(opt['json_path']):
        raise ConfigError(f"--json={opt['json_path']} is a folder; name a file for the records")
    device = resolve_device(opt['device'], opt['dtype'])
    cap = opt['max_context'] or (8192 if device[0].startswith('cuda') else 2048)
    if isinstance(opt['contexts'], int):   # --contexts=1024: one length
        opt['contexts'] = (opt['contexts'],)
    lengths = [int(L) for L in opt['contexts'] if int(L) <= cap]
    if opt['decode'] and not lengths:
        raise ConfigError(f"no context of contexts={opt['contexts']} is <= max_context={cap}: "
                          f"pass --contexts={cap} or raise --max_context")
    return files, opt, device, lengths


def main(argv):
    try:
        files, opt, (dev, ptdtype, ctx), lengths = read_options(argv)
        if opt['gpu_check'] or opt['gpu_check_worker']:
            run_gpu_check(argv)
        configs = file_configs(files, opt) if files else shared_configs(registered(opt), opt)
    except ConfigError as e:
        configurator.fail(e)
    if dev.startswith('cuda'):   # as train.py: TF32 unless the run asked for float32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = use_tf32({'tf32': None}, ptdtype)
    dname = torch.cuda.get_device_name(dev) if dev.startswith('cuda') else 'CPU'
    print(f"device {dev} ({dname}), dtype {str(ptdtype).split('.')[-1]}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    if opt['decode']:
        records = decode_all(configs, opt, dev, ctx, lengths)
    else:
        records = train_all(configs, opt, dev, ptdtype, ctx, reference_gpt=not files)
    if opt['json_path']:
        write_text(opt['json_path'], json.dumps(records, indent=1))
        print(f"wrote {opt['json_path']}")
    return records


def run_gpu_check(argv):
    """--gpu_check and its workers: this process becomes python -m tools.gpu_check with the same arguments
    (that module builds on this one, so this one does not import it); its output and exit status are the command's."""
    sys.stdout.flush()
    sys.stderr.flush()
    path = os.pathsep.join(p for p in (ROOT, os.environ.get('PYTHONPATH')) if p)
    os.execve(sys.executable, [sys.executable, '-m', 'tools.gpu_check', *argv], {**os.environ, 'PYTHONPATH': path})


def decode_all(configs, opt, dev, ctx, lengths):
    """bench_decode for every model that has a decode path, and its table."""
    records = []
    for name, cfg in configs:
        cls, _ = model_classes(cfg['model'])
        if not hasattr(cls, 'decode_step'):
            print(f"{name}: no decode_step, skipped", file=sys.stderr)
            continue
        try:
            records += bench_decode(name, cfg, opt, dev, ctx, lengths)
        except (ValueError, RuntimeError) as e:
            print(f"{name}: decode failed: {str(e).splitlines()[0]}", file=sys.stderr)
    print(table(records, [('model', lambda r: r['model']), ('params', lambda r: f"{r['params'] / 1e6:.2f}M"),
                          ('context', lambda r: str(r['context'])),
                          ('ms/token', lambda r: f"{r['ms_per_token']:.2f}"),
                          ('state MB', lambda r: f"{r['state_mb']:.2f}")]))
    return records


def train_all(configs, opt, dev, ptdtype, ctx, reference_gpt):
    """bench_train for every model, each against the reference (the GPT where reference_gpt and it
    was measured, else the first model), and the table."""
    peak = peak_flops(dev, ptdtype)
    records = []
    for name, cfg in configs:
        records.append(bench_train(name, cfg, opt, dev, ptdtype, ctx, peak))
        print(f"{name}: {records[-1]['ms_per_step']:.1f} ms/step", file=sys.stderr)
    ref = next((r for r in records if r['model'] == 'gpt' and reference_gpt), records[0])
    for r in records:
        r['ratio'] = r['ms_per_step'] / ref['ms_per_step']
        r['flops_ratio'] = r['flops_per_token'] / ref['flops_per_token']
        r['reference'] = ref['model']
        r['mem_method'] = 'cuda max_memory_allocated' if dev.startswith('cuda') else \
            'params + grads + optimizer state + saved activations'
        r['peak_flops'] = peak
    B, T = records[0]['batch_size'], records[0]['block_size']
    print(f"reference: {ref['model']}; peak {peak / 1e12:.3f} TFLOP/s "
          f"({'spec' if dev.startswith('cuda') and peak > 1e14 else 'measured matmul'}); batch {B} x {T}")
    print(table(records, [
        ('model', lambda r: r['model']), ('params', lambda r: f"{r['params'] / 1e6:.2f}M"),
        ('FLOPs/token', lambda r: f"{r['flops_per_token'] / 1e6:.1f}M"),
        ('ms/step', lambda r: f"{r['ms_per_step']:.1f}"), ('ratio', lambda r: f"{r['ratio']:.2f}x"),
        ('FLOP ratio', lambda r: f"{r['flops_ratio']:.2f}x"), ('tokens/s', lambda r: f"{r['tokens_per_s']:,.0f}"),
        ('peak MB', lambda r: f"{r['peak_mem_mb']:.1f}"), ('GFLOP/s', lambda r: f"{r['flops_per_s'] / 1e9:.1f}"),
        ('MFU', lambda r: f"{100 * r['mfu']:.1f}%")]))
    return records


if __name__ == '__main__':
    sys.exit(1 if any('error' in r for r in main(sys.argv[1:]) or []) else 0)
