"""
The models and what train.py, sample.py and the tools share about them: the dict of model
classes, building one from a config, the optimizer classes a recipe names, its runtime knobs, the
device and dtype it runs on, the MFU denominator, the peak memory of a training step (and the
dry run that prints it), and the CPU threads of a run.
"""
import dataclasses
import os
import time
import weakref
from contextlib import contextmanager, nullcontext

import torch
import torch.utils.checkpoint
from torch.utils._python_dispatch import TorchDispatchMode

from baselines import GPT, GPTConfig, Mamba2, Mamba2Config
from configurator import ConfigError
from fon import FON, FONConfig
from parcae import Parcae, ParcaeConfig, ParcaeMuon, StableAdamW
from textnca import TextNCA, TextNCAConfig
from workspace import Workspace, WorkspaceConfig

MODELS = {  # model = 'parcae' picks one: (model class, config class)
    'gpt': (GPT, GPTConfig),
    'mamba2': (Mamba2, Mamba2Config),
    'parcae': (Parcae, ParcaeConfig),
    'textnca': (TextNCA, TextNCAConfig),
    'fon': (FON, FONConfig),
    'workspace': (Workspace, WorkspaceConfig),
}


OPTIMIZERS = {  # the optimizer classes a recipe names (train.py's configure_optimizers builds them)
    'adamw': torch.optim.AdamW,
    'stable_adamw': StableAdamW,     # AdamW with update clipping or atan2: the RDM recipe (Parcae Q.1)
    'muon': torch.optim.Muon,
    'parcae_muon': ParcaeMuon,       # Muon with a factored second moment (Parcae Q.2)
}


def model_classes(name):
    """(model class, config class) of a model's name; an unknown name is one line."""
    if name not in MODELS:
        raise ConfigError(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    return MODELS[name]


def model_fields(name):
    """The config fields of a model with their defaults (None where a default is derived)."""
    _, cfg_cls = model_classes(name)
    return {f.name: f.default if f.default is not dataclasses.MISSING else None for f in dataclasses.fields(cfg_cls)}


def build_model(name, cfg):
    """The model named `name`, its config built from the entries of cfg that are its fields; with
    grad_checkpoint, its blocks recompute their activations in backward."""
    cls, cfg_cls = model_classes(name)
    names = {f.name for f in dataclasses.fields(cfg_cls)}
    try:
        model = cls(cfg_cls(**{k: v for k, v in cfg.items() if k in names}))
    except (ValueError, TypeError, AssertionError, ZeroDivisionError, RuntimeError) as e:
        raise ConfigError(f"invalid {name} config: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    if cfg.get('grad_checkpoint') and 'grad_checkpoint' not in names:   # TextNCA checkpoints its own steps
        if name not in CHECKPOINTED:
            raise ConfigError(f"grad_checkpoint=True: the {name} model has no blocks to recompute (it applies to "
                              f"{', '.join(sorted(CHECKPOINTED))} and textnca)")
        for block in CHECKPOINTED[name](model):
            checkpointed(block)
    return model


CHECKPOINTED = {  # the blocks grad_checkpoint recomputes in backward: each block's inputs are all it keeps
    'gpt': lambda m: m.transformer.h,
    'parcae': lambda m: [*m.prelude, *m.recur, *m.coda],
    'workspace': lambda m: [m.block],     # the shared block, once per round
    'mamba2': lambda m: m.layers,
}


def checkpointed(block):
    """block's forward, in a training step with gradients, through torch.utils.checkpoint (non-
    reentrant): its activations are recomputed in backward, not kept; elsewhere (eval, no_grad
    steps, decoding) as it was."""
    forward = block.forward

    def run(*args, **kw):
        if block.training and torch.is_grad_enabled():
            again = RECOMPUTE[0]
            return torch.utils.checkpoint.checkpoint(forward, *args, use_reentrant=False,
                                                     context_fn=lambda: (nullcontext(), again()), **kw)
        return forward(*args, **kw)
    block.forward = run


RECOMPUTE = [nullcontext]   # what a recomputation runs in (_recomputing: the meta estimate's casts)


# parallel='fsdp': the blocks that are units of their own; the root's unit holds the rest. Every run of
# a unit all-gathers its parameters, so every rank must run it equally often: a block looped to a
# depth each rank draws for itself (Parcae's, TextNCA's) or run again for a micro-batch with holes
# (FON's) stays in the root's unit
FSDP_UNITS = {
    'gpt': lambda m: list(m.transformer.h),
    'mamba2': lambda m: list(m.layers),
    'parcae': lambda m: [*m.prelude, *m.coda] + (list(m.recur) if m.config.depth_sampling == 'fixed' else []),
    'textnca': lambda m: [] if m.config.stochastic_Ts else list(m.cells),
    'workspace': lambda m: [m.block],
    'fon': lambda m: [],
}


SEEDED = (Parcae, TextNCA)   # the models whose forward takes seeds=


def seeded_draws(model):
    """How a model's training draws follow the trainer's per-sequence seeds (forward(seeds=...)):
    'sequence' (each sequence's from its own seed: Parcae's depth and h_0), 'batch' (one draw per
    micro-batch, from its first seed: Parcae's per_batch depth, TextNCA's stochastic_Ts), None (the
    forward takes no seeds)."""
    if not isinstance(model, SEEDED):
        return None
    c = model.config
    return 'batch' if getattr(c, 'depth_sampling', None) == 'per_batch' or getattr(c, 'stochastic_Ts', ()) else 'sequence'


DEPTH_KNOBS = ('num_recur', 'Ts', 'rounds')   # loop depths: Parcae's recurrences, TextNCA's NCA steps, the workspace's rounds


def check_knobs(knobs):
    """One rule for a loop depth in every tool and on every path (forward or decode): an int >= 1
    (None: the model's default)."""
    for k in DEPTH_KNOBS:
        v = knobs.get(k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise ConfigError(f"{k} is a loop depth: it must be an integer >= 1, got {v!r}")
    return knobs


# ----------------------------------------------------------------------------- devices
def check_device(dev):
    """A device this machine has: cpu, cuda, cuda:N (N < the number of GPUs), mps."""
    try:
        kind = torch.device(dev).type
    except (RuntimeError, ValueError):
        kind = None
    if kind not in ('cpu', 'cuda', 'mps'):
        raise ConfigError(f"device must be auto, cpu, cuda, cuda:N or mps, got {dev!r}")
    if kind == 'cuda':
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise ConfigError(f"device {dev!r}: this machine has no CUDA GPU (or this torch build has no CUDA); use --device=cpu")
        if torch.device(dev).index is not None and torch.device(dev).index >= n:
            raise ConfigError(f"device {dev!r} does not exist: this machine has {n} CUDA GPU(s), cuda:0..cuda:{n - 1}")
    if kind == 'mps' and not torch.backends.mps.is_available():
        raise ConfigError(f"device {dev!r}: MPS (Apple GPU) is not available here; use --device=cpu")


def resolve_device(device, dtype):
    """'auto' picks cuda when there is one, and bf16 where the GPU supports it: (device, torch
    dtype, autocast context). On CUDA it turns cuDNN's attention off (flash attention runs)."""
    dev = ('cuda' if torch.cuda.is_available() else 'cpu') if device == 'auto' else str(device)
    check_device(dev)
    device_type = 'cuda' if dev.startswith('cuda') else ('mps' if dev.startswith('mps') else 'cpu')
    if device_type == 'cuda':
        # cuDNN's SDPA builds a plan for every new shape, ~4.5 ms of host time each: Parcae's loop
        # shrinks the batch step by step and decoding grows the keys token by token. On an H200,
        # off: Parcae-140M 402 -> 183 ms/step, GPT-140M decode 45-59 -> 5 ms/token
        torch.backends.cuda.enable_cudnn_sdp(False)
    if dtype == 'auto':
        dtype = 'bfloat16' if device_type == 'cuda' and torch.cuda.is_bf16_supported() else 'float32'
    pt = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}.get(dtype)
    if pt is None:
        raise ConfigError(f"dtype must be auto, float32, bfloat16 or float16, got {dtype!r}")
    return dev, pt, nullcontext() if pt == torch.float32 else torch.autocast(device_type, dtype=pt)


def use_tf32(cfg, ptdtype):
    """TF32 for float32 matmuls on CUDA: the tf32 key, else on unless the run asked for float32
    (the workspace paper trains its small models in FP32; TF32 keeps only 10 mantissa bits)."""
    return cfg['tf32'] if cfg['tf32'] is not None else ptdtype != torch.float32


def measure_peak_flops(device, dtype, n=1024, reps=2):
    """A device's achievable matmul FLOP/s, measured (best of three rounds after a warm-up): the
    MFU denominator where no spec sheet applies, so MFU means something on a CPU too."""
    g = torch.Generator(device).manual_seed(0)  # leaves the global RNG alone (exact resume)
    a, b = (torch.randn(n, n, device=device, dtype=dtype, generator=g) for _ in range(2))
    sync = torch.cuda.synchronize if str(device).startswith('cuda') else (lambda: None)
    best = 0.0
    for _ in range(3):
        sync()
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        sync()
        best = max(best, 2 * n ** 3 * reps / (time.perf_counter() - t0))
    return best


GPU_PEAKS = (  # dense bf16/fp16 tensor-core spec-sheet peaks; the first name found in the device's name wins
    ('H100 PCIe', 756e12), ('H100 NVL', 835e12), ('H100', 989e12), ('H200', 989e12), ('GH200', 989e12), ('A100', 312e12),
    ('B200', 2250e12), ('B100', 1750e12), ('RTX PRO 6000', 503e12), ('L40S', 362e12), ('A10G', 125e12))


def spec_peak_flops(device, dtype):
    """The spec sheet's dense bf16/fp16 tensor-core peak of a known GPU, else None."""
    if str(device).startswith('cuda') and dtype in (torch.bfloat16, torch.float16):
        name = torch.cuda.get_device_name(device)
        for key, flops in GPU_PEAKS:
            if key in name:
                return flops
    return None


def peak_flops(device, dtype):
    """The MFU denominator: the spec sheet's peak, else the fastest matmul measured here in fp32 or
    the run's dtype (not fp16 on a CPU, whose slow fallback kernel would undercount the machine)."""
    spec = spec_peak_flops(device, dtype)
    if spec:
        return spec
    cpu = not str(device).startswith(('cuda', 'mps'))
    dtypes = {torch.float32, dtype} - ({torch.float16} if cpu else set())
    n = 1024 if cpu else 8192   # a 1024^2 matmul cannot fill a modern GPU
    return max(measure_peak_flops(device, d, n=n) for d in dtypes)


# ----------------------------------------------------------------------------- memory
# CUDA autocast's op lists (ATen's autocast_mode.h), by the name a Python call carries: the meta
# device runs no autocast, so the estimate applies its casts itself
AUTOCAST_LOWER = {'linear', 'matmul', '__matmul__', '__rmatmul__', 'mm', 'mv', 'bmm', 'baddbmm', 'addmm', 'addbmm', 'addmv',
                  'addr', 'einsum', 'vecdot', 'chain_matmul', 'multi_dot', 'prelu', 'conv1d', 'conv2d', 'conv3d',
                  'conv_transpose1d', 'conv_transpose2d', 'conv_transpose3d', 'scaled_dot_product_attention'}
AUTOCAST_FP32 = {'acos', 'asin', 'cosh', 'sinh', 'tan', 'erfinv', 'exp', 'expm1', 'log', 'log10', 'log2', 'log1p',
                 'reciprocal', 'rsqrt', 'pow', '__pow__', '__rpow__', '__rtruediv__', '__rdiv__', 'softplus',
                 'layer_norm', 'group_norm', 'nuclear_norm', 'normalize', 'cosine_similarity', 'cross_entropy',
                 'nll_loss', 'poisson_nll_loss', 'cosine_embedding_loss', 'hinge_embedding_loss', 'kl_div', 'l1_loss',
                 'smooth_l1_loss', 'huber_loss', 'mse_loss', 'margin_ranking_loss', 'multilabel_margin_loss',
                 'soft_margin_loss', 'triplet_margin_loss', 'multi_margin_loss', 'binary_cross_entropy_with_logits',
                 'dist', 'pdist', 'cdist', 'renorm', 'logsumexp'}
AUTOCAST_FP32_DTYPE = {'prod', 'softmax', 'log_softmax', 'cumprod', 'cumsum', 'vector_norm', 'matrix_norm', 'sum',
                       'norm'}   # these compute in fp32 from the input as it is (dtype=float32), no fp32 copy
AUTOCAST_PROMOTE = {'addcdiv', 'addcmul', 'atan2', 'bilinear', 'cross', 'dot', 'vdot', 'grid_sample', 'index_put',
                    'tensordot', 'scatter_add'}


class _FusedAttention(torch.autograd.Function):
    """The memory of a fused attention kernel (flash or memory-efficient, as the CPU and CUDA run
    scaled_dot_product_attention): it keeps q, k, v, the output and one fp32 log-sum-exp per query
    for backward, never the T x T weights that the meta device's math fallback would keep."""

    @staticmethod
    def forward(ctx, q, k, v, mask):
        out = q.new_empty(q.shape[:-1] + v.shape[-1:])
        ctx.save_for_backward(q, k, v, out, q.new_empty(q.shape[:-1], dtype=torch.float32),
                              *([] if mask is None else [mask]))
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v = ctx.saved_tensors[:3]
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), None


class _MetaRun(torch.overrides.TorchFunctionMode):
    """A forward on the meta device as a GPU runs it: CUDA autocast's casts at `dtype` (None: off;
    a parameter is cast once per forward where grad is on, as autocast caches it) and fused
    attention. The model's own torch.autocast(device, enabled=False) regions turn the casts off."""

    def __init__(self, dtype):
        super().__init__()
        self.dtype, self.on, self.cache = dtype, dtype is not None, {}

    def cast(self, t, dtype):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.dtype in (dtype, torch.float64):
            return t
        if isinstance(t, torch.nn.Parameter) and t.requires_grad and torch.is_grad_enabled() and dtype == self.dtype:
            if id(t) not in self.cache:
                self.cache[id(t)] = t.to(dtype)
            return self.cache[id(t)]
        return t.to(dtype)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, '__name__', '')
        to = None
        if self.on and 'dtype' not in kwargs and 'out' not in kwargs:
            floats = {t.dtype for t in torch.utils._pytree.tree_leaves((args, kwargs))
                      if isinstance(t, torch.Tensor) and t.is_floating_point()}
            if name in AUTOCAST_LOWER:
                to = self.dtype
            elif name in AUTOCAST_FP32 or (name in AUTOCAST_PROMOTE and torch.float32 in floats):
                to = torch.float32
            elif name in AUTOCAST_FP32_DTYPE and floats & {torch.bfloat16, torch.float16}:
                kwargs = {**kwargs, 'dtype': torch.float32}
        if to is not None:
            args, kwargs = torch.utils._pytree.tree_map(lambda t: self.cast(t, to), (args, kwargs))
        if name == 'scaled_dot_product_attention':
            q, k, v = args[:3]
            return _FusedAttention.apply(q, k, v, kwargs.get('attn_mask', args[3] if len(args) > 3 else None))
        return func(*args, **kwargs)

    def autocast(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        """torch.autocast for the model's code while this runs: on the meta device, a region of
        this emulation; elsewhere torch's own."""
        if device_type != 'meta':
            return self._torch_autocast(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
        run = self

        class Region:
            def __enter__(self):
                self.prev = run.on, run.dtype
                run.on, run.dtype = enabled and run.dtype is not None, dtype or run.dtype

            def __exit__(self, *exc):
                run.on, run.dtype = self.prev
        return Region()

    def __enter__(self):
        self._torch_autocast, torch.autocast = torch.autocast, self.autocast
        return super().__enter__()

    def __exit__(self, *exc):
        torch.autocast = self._torch_autocast
        return super().__exit__(*exc)


class _Allocations(TorchDispatchMode):
    """The bytes the meta device's storages would hold as the ops run: a storage counts from the op
    that makes it until it is freed (a caching allocator's 'allocated'); the peak, the phase it
    came in, and the storages live then."""

    def __init__(self):
        super().__init__()
        self.live = {}   # storage key -> (bytes, serial: the key of a freed storage may come back)
        self.now, self.peak, self.serials, self.phase, self.peak_phase, self.at_peak = 0, 0, 0, '', '', set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage()._cdata for t in torch.utils._pytree.tree_leaves((args, kwargs))
                  if isinstance(t, torch.Tensor) and t.device.type == 'meta'}
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.device.type == 'meta':
                st = t.untyped_storage()
                key = st._cdata
                if key not in self.live and key not in inputs:   # a new storage, not an in-place op's or a view's
                    self.serials += 1
                    self.live[key] = (st.nbytes(), self.serials)
                    self.now += st.nbytes()
                    weakref.finalize(st, self.free, key)
        if self.now > self.peak:
            self.peak, self.peak_phase, self.at_peak = self.now, self.phase, {s for _, s in self.live.values()}
        return out

    def free(self, key):
        self.now -= self.live.pop(key)[0]

    def held(self, tensors):
        """{serial: bytes} of the storages under these tensors that this run made."""
        return dict(self.live[k][::-1] for k in {t.untyped_storage()._cdata for t in tensors} if k in self.live)


def storage_bytes(tensors):
    """The bytes of the distinct storages under some tensors (a view or a tied weight counted once)."""
    seen = {}
    for t in tensors:
        seen[t.untyped_storage()._cdata] = t.untyped_storage().nbytes()
    return sum(seen.values())


def deepest_knobs(model, cfg):
    """The forward knobs of a training step at its deepest: Parcae's sampled depth at its clip,
    TextNCA's largest sampled Ts, FON's hole stream running when hole fine-tuning is on."""
    knobs = model.knobs
    c = getattr(model, 'config', None)
    kw = {}
    if 'num_recur' in knobs:
        kw['num_recur'] = c.max_recurrence
    if 'Ts' in knobs and getattr(c, 'stochastic_Ts', ()):
        kw['Ts'] = max(c.stochastic_Ts)
    return kw


@contextmanager
def _recomputing(dtype):
    """grad_checkpoint's recomputation in backward (another thread, outside _MetaRun) cast as forward was."""
    RECOMPUTE[0] = lambda: _MetaRun(dtype)
    try:
        yield
    finally:
        RECOMPUTE[0] = nullcontext


def estimate_memory(cfg, micro_batch, accum, configure_optimizers, device_type='cuda'):
    """The peak bytes of one training step (the second: the optimizer holds its states), in eager
    mode, at micro_batch sequences of block_size and cfg's dtype (autocast for bf16/fp16, weights in
    fp32), found by running it on the meta device: every allocation and free as the ops make them.
    device_type 'cuda': AdamW fused (no step temporaries), dtype 'auto' bf16. The parts at the peak:
    weights, gradients (all; and the part live at the peak), optimizer states, activations (all
    else live then: what forward keeps for backward and backward's temporaries); gathered: the
    parameters FSDP holds whole at once (the root's unit and the largest block unit). cfg: every
    train.py setting; configure_optimizers: train.py's (model, cfg, device_type) -> optimizers."""
    dtype = {'float32': None, 'bfloat16': torch.bfloat16, 'float16': torch.float16,
             'auto': torch.bfloat16 if device_type == 'cuda' else None}[cfg['dtype']]
    with torch.device('meta'):
        model = build_model(cfg['model'], cfg)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opts = configure_optimizers(model, cfg, 'cpu')   # the eager step: no fused kernel runs on the meta device
    for p in params:   # a first step makes the optimizer's states
        p.grad = torch.zeros_like(p)
    for opt in opts:
        opt.step()
        opt.zero_grad(set_to_none=True)
    states = {type(opt).__name__: storage_bytes([t for s in opt.state.values() for t in s.values()
                                                 if isinstance(t, torch.Tensor) and t.device.type == 'meta'])
              for opt in opts}   # a step count on the CPU is no GPU memory
    kw = deepest_knobs(model, cfg)
    if cfg['p_fill'] > 0 and 'holes' in model.knobs:
        kw['holes'] = torch.zeros(micro_batch, cfg['block_size'], dtype=torch.bool, device='meta')
    if not cfg['causal']:   # train.py's BERT-style step
        kw = {'causal': False}
    mem, saved = _Allocations(), None
    with mem, _recomputing(dtype):
        for _ in range(min(accum, 2)):   # a second micro-step runs with every gradient held
            x = torch.randint(0, cfg['vocab_size'], (micro_batch, cfg['block_size']), device='meta')
            mem.phase = 'forward'
            with _MetaRun(dtype):
                loss = model(x, x, **kw)[1] / accum
            saved = mem.now if saved is None else saved
            mem.phase = 'backward'
            loss.backward()
            del loss, x
        grads = mem.held([p.grad for p in params if p.grad is not None])
        mem.phase = 'optimizer step'
        if cfg['grad_clip'] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg['grad_clip'])
        for opt in opts:
            if not (device_type == 'cuda' and type(opt) is torch.optim.AdamW):
                opt.step()
            opt.zero_grad(set_to_none=True)
    grads_at_peak = sum(b for s, b in grads.items() if s in mem.at_peak)
    units = FSDP_UNITS[cfg['model']](model)
    in_units = {id(p) for u in units for p in u.parameters()}
    root = storage_bytes([p for p in model.parameters() if id(p) not in in_units])
    out = {'weights': storage_bytes(list(model.parameters()) + list(model.buffers())),
           'gradients': sum(grads.values()), 'optimizer': sum(states.values()), 'optimizers': states,
           'grads_at_peak': grads_at_peak, 'activations': mem.peak - grads_at_peak, 'saved': saved,
           'phase': mem.peak_phase, 'dtype': dtype or torch.float32,
           'gathered': root + max([storage_bytes(list(u.parameters())) for u in units], default=0)}
    out['total'] = out['weights'] + out['optimizer'] + mem.peak
    return out


# ----------------------------------------------------------------------------- the machine, and a dry run
def idle_cores(cores, read=lambda: open('/proc/stat').read(), wait=0.2):
    """How many of the given cores (cpu ids) sat idle over the next `wait` seconds, read from the
    per-core times in /proc/stat (idle and iowait over all). This process sleeps meanwhile, so it
    does not count itself. None where there is no /proc/stat."""
    def times():
        rows = {}
        for line in read().splitlines():
            name, *ticks = line.split()
            if name.startswith('cpu') and name[3:].isdigit() and int(name[3:]) in cores:
                rows[int(name[3:])] = [int(t) for t in ticks[:8]]
        return rows
    try:
        before = times()
        time.sleep(wait)
        after = times()
    except (OSError, ValueError):
        return None
    idle = 0.0
    for c in before.keys() & after.keys():
        d = [b - a for a, b in zip(before[c], after[c])]
        idle += (d[3] + d[4]) / sum(d) if sum(d) > 0 else 1.0
    return idle if before.keys() & after.keys() else None


def cpu_threads(read=lambda: open('/proc/stat').read(), wait=0.2):
    """Sets the threads of a CPU run to the cores idle right now (at least one, shared among
    torchrun's ranks), because threads that compete with other jobs for a core slow torch many
    times over (docs/tools.md has the measurements). Leaves OMP_NUM_THREADS's choice alone.
    Returns the line the run prints, None when OMP_NUM_THREADS is set."""
    if 'OMP_NUM_THREADS' in os.environ:
        return None
    cpus = os.sched_getaffinity(0) if hasattr(os, 'sched_getaffinity') else set(range(os.cpu_count() or 1))
    cores = len(cpus)
    per_process = int(os.environ.get('LOCAL_WORLD_SIZE', 1))     # torchrun's CPU ranks share the cores
    idle = idle_cores(cpus, read, wait)
    if idle is None:   # no /proc (macOS): the load average
        idle = cores - os.getloadavg()[0]
    n = max(1, min(torch.get_num_threads(), round(idle) // per_process))
    torch.set_num_threads(n)
    return f"{n} CPU thread(s) of {cores} cores, {idle:.1f} of them idle now (set OMP_NUM_THREADS to choose)"


def print_sizes(cfg, world, split, configure_optimizers):
    """Parameters, FLOPs and the peak training memory of a config on one GPU of world (split: train's
    (cfg, world) -> (micro-batch, micro-steps) per process), built and run on the meta device: no
    data, no memory. Where it does not fit 80 GB, the micro_batch_size that does."""
    with torch.device('meta'):
        m = build_model(cfg['model'], cfg)
    print(f"model: {cfg['model']}")
    print(f"parameters: {m.num_params()}")
    print(f"flops_per_token: {m.flops_per_token(cfg['block_size']):.0f}")
    micro_batch, accum = split(cfg, world)
    try:
        mem = estimate_memory(cfg, micro_batch, accum, configure_optimizers)
    except (RuntimeError, NotImplementedError) as e:   # an op the meta device cannot run (a value read back)
        return print(f"peak training memory: not estimated: the meta device cannot run this step "
                     f"({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else 'no detail'})")
    gb = lambda b: f"{b / 2 ** 30:.2f} GB"   # noqa: E731 (GiB, as peak_mem_gb in log.jsonl)
    kept = {'AdamW': '2 fp32 states per parameter', 'StableAdamW': '2 fp32 states per parameter',
            'Muon': '1 momentum per matrix', 'ParcaeMuon': '1 momentum per matrix + 1 second moment per row or column'}
    opt = '; '.join(f"{k} {gb(v)}: {kept.get(k, 'its states')}" for k, v in mem['optimizers'].items())
    print(f"peak training memory per GPU (estimated: one step run on the meta device, eager, "
          f"{str(mem['dtype'])[6:]}{' autocast' if mem['dtype'] != torch.float32 else ''}, "
          f"micro-batch {micro_batch} x {cfg['block_size']} tokens, {accum} micro-step(s), world {world}"
          f"{', activation checkpointing' if cfg.get('grad_checkpoint') else ''}):")
    print(f"  weights: {gb(mem['weights'])} (fp32)")
    print(f"  gradients: {gb(mem['gradients'])} (fp32; {gb(mem['grads_at_peak'])} of them held at the peak)")
    print(f"  optimizer states: {gb(mem['optimizer'])} ({opt})")
    print(f"  activations: {gb(mem['activations'])} (held at the peak, in the {mem['phase']}; "
          f"{gb(mem['saved'])} kept by the forward for backward)")
    print(f"  total: {gb(mem['total'])} (weights + optimizer states + activations + gradients held at the peak)")
    if cfg.get('parallel') != 'fsdp':
        print(f"  under torchrun: + {gb(mem['gradients'])} for DDP's gradient buckets (a copy of the gradients), "
              f"{gb(mem['total'] + mem['gradients'])} per GPU"
              f"{' (the verdict below counts them: world ' + str(world) + ')' if world > 1 else ''}")
    elif world > 1:
        print(f"  under torchrun with FSDP (world {world}): weights, gradients and optimizer states "
              f"{gb((mem['weights'] + mem['gradients'] + mem['optimizer']) / world)} (a 1/{world} share), "
              f"+ {gb(2 * mem['gathered'])} gathered whole at once (the root unit's and the largest block's "
              f"parameters, and their gradients before the reduce-scatter), + the activations: "
              f"{gb(per_gpu(mem, world, 'fsdp'))} per GPU (the verdict below counts it)")
    else:
        print("  under torchrun with FSDP: not counted at world 1; set WORLD_SIZE to the processes it will run")
    print("  with torch.compile: not estimated: inductor decides when compiling which activations to keep "
          "and which to recompute in backward, and fuses elementwise ops, so its peak is usually below eager's")
    fits = ['yes' if per_gpu(mem, world, cfg.get('parallel')) <= usable(cap) else 'no' for cap in (40, 80)]
    print(f"fits on a 40 GB / 80 GB GPU: {fits[0]} / {fits[1]} (keeping 10% for the CUDA context and the allocator)")
    if fits[1] == 'no':
        print(smaller_micro_batch(cfg, world, split, configure_optimizers, mem, micro_batch))


def usable(cap_gb):
    return 0.9 * cap_gb * 2 ** 30


def per_gpu(mem, world, parallel='ddp'):
    """The estimated peak per GPU of world processes: under DDP its gradient buckets (a copy of the
    gradients) too; under FSDP a 1/world share of the weights, gradients and optimizer states, what
    it gathers whole at once (parameters, and their gradients before the reduce-scatter) and the
    activations, as one process has them."""
    if world == 1:
        return mem['total']
    if parallel == 'fsdp':
        return (mem['weights'] + mem['gradients'] + mem['optimizer']) / world + 2 * mem['gathered'] + mem['activations']
    return mem['total'] + mem['gradients']


def smaller_micro_batch(cfg, world, split, configure_optimizers, mem, micro_batch):
    """The line that names the largest micro_batch_size whose step fits 80 GB: activations scale
    with the micro-batch, the rest does not; the guess is checked by estimating it."""
    parallel = cfg.get('parallel')
    fixed = per_gpu(mem, world, parallel) - mem['activations']
    for b in sorted((d for d in range(1, micro_batch) if cfg['batch_size'] % d == 0), reverse=True):
        if fixed + mem['activations'] * b / micro_batch > usable(80):
            continue
        c = {**cfg, 'micro_batch_size': b}
        est = estimate_memory(c, *split(c, world), configure_optimizers)
        need = per_gpu(est, world, parallel)
        if need <= usable(80):
            return (f"fits 80 GB with --micro_batch_size={b} (estimated {need / 2 ** 30:.2f} GB per GPU; the same "
                    f"iteration in more micro-steps)")
    return ("no micro_batch_size fits 80 GB: weights, gradients and optimizer states alone take "
            f"{fixed / 2 ** 30:.2f} GB per GPU; activation checkpointing (grad_checkpoint=True) or more GPUs may")
