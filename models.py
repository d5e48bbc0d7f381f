"""
What train.py, sample.py and the tools share about a model: the registry of models, building one
from a config, its checkpoint (read, written atomically, loaded), the device and dtype it runs on,
the MFU denominator, and its optimizers.
"""
import dataclasses
import importlib
import inspect
import json
import os
import shutil
import time
from contextlib import nullcontext

import torch

from configurator import ConfigError, check, parse_args, train_defaults
from parcae import ParcaeMuon, StableAdamW

MODELS = {  # name -> (module, model class, config class); model = 'parcae' picks one
    'gpt': ('baselines', 'GPT', 'GPTConfig'),
    'mamba2': ('baselines', 'Mamba2', 'Mamba2Config'),
    'parcae': ('parcae', 'Parcae', 'ParcaeConfig'),
    'textnca': ('textnca', 'TextNCA', 'TextNCAConfig'),
    'fon': ('fon', 'FON', 'FONConfig'),
    'workspace': ('workspace', 'Workspace', 'WorkspaceConfig'),
}


def model_classes(name):
    if name not in MODELS:
        raise ConfigError(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    module, cls, cfg_cls = MODELS[name]
    mod = importlib.import_module(module)
    return getattr(mod, cls), getattr(mod, cfg_cls)


def model_fields(name):
    """The config fields of a model with their defaults (None where a default is derived)."""
    _, cfg_cls = model_classes(name)
    return {f.name: f.default if f.default is not dataclasses.MISSING else None for f in dataclasses.fields(cfg_cls)}


# train.py's shape defaults: they apply to a model that has such a field, and a model without
# one refuses the key when it is given
SHAPE_KEYS = ('n_layer', 'n_head', 'n_embd', 'dropout')


def resolve_config(argv, with_given=False):
    """train.py's defaults < config files < --key=value, checked against train.py's keys and the
    model's fields (with_given: also the settings the user gave, config files included). A given
    shape key the model has no field for is refused: it would change nothing."""
    defaults = train_defaults()
    given = parse_args(argv)
    name = given.get('model') or (given.get('init_from') == 'resume' and run_model(given.get('out_dir', defaults['out_dir'])))
    name = name or defaults['model']
    fields = model_fields(name)
    known = {**fields, **defaults}
    cfg = {**defaults, **check(given, known)}
    unused = [k for k in given if k in SHAPE_KEYS and k not in fields]
    if unused:
        k = unused[0]
        raise ConfigError(f"the {name} model has no '{k}' (given {given.where(k)}), so it would change nothing; "
                          f"its own keys: {', '.join(fields)}")
    return (cfg, given) if with_given else cfg


def run_model(out_dir):
    """The model a run folder trains (its config.json's), None where there is no readable one: a
    resumed run's keys are checked against its own model."""
    try:
        return json.load(open(os.path.join(out_dir, 'config.json'))).get('model')
    except (OSError, ValueError, AttributeError):
        return None


def build_model(name, cfg):
    """The model named `name`, its config built from the entries of cfg that are its fields."""
    cls, cfg_cls = model_classes(name)
    names = {f.name for f in dataclasses.fields(cfg_cls)}
    try:
        return cls(cfg_cls(**{k: v for k, v in cfg.items() if k in names}))
    except (ValueError, TypeError, AssertionError, ZeroDivisionError, RuntimeError) as e:
        raise ConfigError(f"invalid {name} config: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def knob_names(model):
    """The runtime knobs a model's forward accepts (Parcae num_recur, TextNCA Ts, FON holes...)."""
    params = inspect.signature(model.forward).parameters
    return [p for p in params if p not in ('idx', 'targets')]


DEPTH_KNOBS = ('num_recur', 'Ts')   # loop depths: Parcae's recurrences, TextNCA's NCA steps


def check_knobs(knobs):
    """One rule for a loop depth in every tool and on every path (forward or decode): an int >= 1
    (None: the model's default)."""
    for k in DEPTH_KNOBS:
        v = knobs.get(k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise ConfigError(f"{k} is a loop depth: it must be an integer >= 1, got {v!r}")
    return knobs


# ----------------------------------------------------------------------------- checkpoints
CKPT_KEYS = ('model', 'model_name', 'model_args', 'config', 'iter_num')


def read_checkpoint(path, device='cpu'):
    """The checkpoint dict in an out_dir or a ckpt.pt file; a file torch cannot read, or one
    train.py did not write, is one line."""
    if os.path.isdir(path):
        path = os.path.join(path, 'ckpt.pt')
    if not os.path.isfile(path):
        aside = os.path.join(os.path.dirname(path), 'replaced')
        if os.path.isfile(os.path.join(aside, 'ckpt.pt')):   # train.py's --overwrite, stopped before its first checkpoint
            raise ConfigError(f"no checkpoint at {path}, but {aside}/ holds the run an interrupted --overwrite set aside: "
                              f"any python train.py start with --out_dir={os.path.dirname(path)} puts it back (or move "
                              f"its files back into {os.path.dirname(path)} yourself)")
        raise ConfigError(f"no checkpoint at {path} (train one first: python train.py --out_dir=...)")
    try:
        ckpt = torch.load(path, map_location=device, weights_only=False)
    except Exception as e:  # truncated, empty, garbage: torch says so in many ways
        raise ConfigError(f"{path} is unreadable ({os.path.getsize(path)} bytes; {type(e).__name__}: "
                          f"{str(e).splitlines()[0][:120] if str(e) else 'no detail'}): train again or restore a copy")
    missing = [k for k in CKPT_KEYS if not isinstance(ckpt, dict) or k not in ckpt]
    if missing:
        raise ConfigError(f"{path} is not a train.py checkpoint (it lacks {', '.join(missing)})")
    return ckpt


def state_dict_error(e):
    """The first specific line of load_state_dict's error (a size mismatch, a missing key)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return (lines[1:] or lines or ['no detail'])[0][:300]


def load_weights(model, state, source):
    try:
        model.load_state_dict(state)
    except RuntimeError as e:  # a state dict of other shapes
        raise ConfigError(f"the weights in {source} do not fit this config's {type(model).__name__}: {state_dict_error(e)}")


def load_checkpoint(path, device='cpu'):
    """(model, checkpoint dict) from an out_dir or a ckpt.pt file."""
    ckpt = read_checkpoint(path, device)
    model = build_model(ckpt['model_name'], ckpt['model_args'])
    try:
        model.load_state_dict(ckpt['model'])
    except RuntimeError as e:  # weights of other shapes than the model code builds now
        raise ConfigError(f"the weights in {path} do not fit the current {ckpt['model_name']} model code: "
                          f"{state_dict_error(e)}")
    return model.to(device), ckpt


def save_checkpoint(path, ckpt):
    """Atomic: a crash, a full disk or Ctrl-C mid-write leaves the previous ckpt.pt whole and no
    temporary file. A write that fails is one line (ConfigError) with the file and the space it needed."""
    tmp = path + '.tmp'
    errors = []
    try:
        with open(tmp, 'wb') as f:
            torch.save(ckpt, _Writer(f, errors))
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        e = errors[0] if errors else e   # torch reports a failed write as "unexpected pos"
        if not isinstance(e, (OSError, RuntimeError)):
            raise
        free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free
        kept = f"{path} still holds the previous checkpoint" if os.path.exists(path) else f"there is no {path} yet"
        raise ConfigError(f"cannot write {tmp}: {getattr(e, 'strerror', None) or str(e).splitlines()[0][:200]} "
                          f"(it needs about {tensor_bytes(ckpt) / 2**20:.1f} MiB, {free / 2**20:.1f} MiB free); "
                          f"removed it, {kept}") from None


class _Writer:
    """A file's write that keeps the OSError torch.save would turn into a RuntimeError."""
    def __init__(self, f, errors):
        self.f, self.errors = f, errors

    def write(self, b):
        try:
            return self.f.write(b)
        except OSError as e:
            self.errors.append(e)
            raise

    def flush(self):
        self.f.flush()


def tensor_bytes(obj):
    """The bytes of every tensor in a nested checkpoint: about what it takes on disk."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


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
    dtype, autocast context)."""
    dev = ('cuda' if torch.cuda.is_available() else 'cpu') if device == 'auto' else str(device)
    check_device(dev)
    device_type = 'cuda' if dev.startswith('cuda') else ('mps' if dev.startswith('mps') else 'cpu')
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


# ----------------------------------------------------------------------------- optimizers
def configure_optimizers(model, cfg, device_type):
    """AdamW, plus Muon for the hidden matrices when optimizer='muon': the model's own groups when
    it has optim_groups() (Parcae), else by shape. The recipe keys cfg lacks take train.py's
    defaults. Muon is torch.optim.Muon or the Parcae paper's (muon_variant='parcae'); AdamW with
    update clipping or atan2 is the RDM recipe's (Parcae Q.1)."""
    cfg = {**train_defaults(), **cfg}
    if hasattr(model, 'optim_groups'):
        groups = model.optim_groups(cfg['weight_decay'])
    else:
        embed = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
        muon = [] if cfg['optimizer'] != 'muon' else [
            m.weight for name, m in model.named_modules()
            if isinstance(m, torch.nn.Linear) and id(m.weight) not in embed and 'lm_head' not in name]
        mids = {id(p) for p in muon}
        rest = [p for p in model.parameters() if id(p) not in mids]
        groups = [{'params': [p for p in rest if p.dim() >= 2], 'weight_decay': cfg['weight_decay']},
                  {'params': [p for p in rest if p.dim() < 2], 'weight_decay': 0.0},
                  {'params': muon, 'optimizer': 'muon'}]
    for g in groups:  # frozen parameters take no step; optimizer='adamw' overrules a model's Muon groups
        g['params'] = [p for p in g['params'] if p.requires_grad]
        if cfg['optimizer'] != 'muon':
            g['optimizer'] = 'adamw'
    adamw = [g for g in groups if g.get('optimizer', 'adamw') == 'adamw' and g['params']]
    muon = [g for g in groups if g.get('optimizer', 'adamw') == 'muon' and g['params']]
    betas = (cfg['beta1'], cfg['beta2'])
    if cfg['update_clipping'] or cfg['adam_atan2']:
        opts = [StableAdamW(adamw, lr=cfg['learning_rate'], betas=betas, eps=cfg['eps'],
                            update_clipping=cfg['update_clipping'], atan2=cfg['adam_atan2'])]
    else:
        opts = [torch.optim.AdamW(adamw, lr=cfg['learning_rate'], betas=betas, eps=cfg['eps'], fused=device_type == 'cuda')]
    if muon:
        kw = dict(lr=cfg['muon_lr'] or cfg['learning_rate'], momentum=cfg['muon_momentum_start']
                  if cfg['muon_momentum_warmup'] > 0 else cfg['muon_momentum'], weight_decay=cfg['muon_weight_decay'])
        if cfg['muon_variant'] == 'parcae':
            opts.append(ParcaeMuon(muon, beta2=cfg['muon_beta2'], **kw))
        else:
            opts.append(torch.optim.Muon(muon, **kw))
    return opts
