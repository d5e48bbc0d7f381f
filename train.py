"""
The one trainer, for every model in the repo.

    python train.py                                     # small GPT on the offline synthetic battery
    python train.py config/parcae_140m.py --batch_size=16
    torchrun --standalone --nproc_per_node=8 train.py config/parcae_140m.py
    python train.py config/parcae_140m.py --dry_run=True  # parameters and FLOPs, no memory

A config file is plain Python assignments to the keys below or to fields of the chosen model's
config dataclass. One iteration sees batch_size * gradient_accumulation_steps sequences of
block_size tokens on any number of processes: torchrun shares them out (gradient_accumulation_steps
/ world_size micro-steps each, as in nanoGPT, or smaller micro-batches where that does not divide).

A new run never replaces a trained one: into an out_dir that holds ckpt.pt it needs
--init_from=resume (continue), another --out_dir, or --overwrite=True. --eval_only=True writes nothing.
"""
import dataclasses
import importlib
import inspect
import json
import math
import os
import sys
import time
from contextlib import nullcontext

import torch

from configurator import ConfigError, check, check_values, parse_args
from dataloader import Batches, check_tokens, dataset_vocab, read_meta, split_batch, split_hint
from optim import make_optimizers, set_schedule

# ----------------------------------------------------------------------------- defaults
# I/O
out_dir = 'out'
eval_interval = 250
log_interval = 10
eval_iters = 20
eval_only = False
always_save_checkpoint = True
init_from = 'scratch'        # 'scratch' | 'resume' (from out_dir) | a directory whose ckpt.pt gives the weights
overwrite = False            # a new run (init_from not 'resume') may replace out_dir's ckpt.pt and log.jsonl
dry_run = False              # build on the meta device, print parameters and flops_per_token, exit
seed = 1337
# data
data_dir = 'data'
dataset = 'synthetic'
batch_size = 16
block_size = 128
gradient_accumulation_steps = 1
sampler = 'random'           # 'random' windows | 'blocks': non-overlapping blocks of block_size+1, without replacement
p_synth = 0.0                # probability that a sequence comes from synth_dataset (same tokenizer)
synth_dataset = 'synthetic'
p_fill = 0.0                 # hole fine-tuning: probability that a sequence gets holes
hole_stride = 8              # holes fall on positions p with p % hole_stride == 0 ...
p_hole = 0.15                # ... each with this probability
mask_id = None               # None: meta.json's mask_id, else the first id after the data's vocabulary
# model: any field of the model's config dataclass may be set too; these shape defaults apply
# to every model that has such a field
model = 'gpt'
vocab_size = None            # None: from the data's meta.json
n_layer = 4
n_head = 4
n_embd = 128
dropout = 0.0
# optimizer
optimizer = 'adamw'          # 'adamw' | 'muon' (Muon for hidden 2-D matrices, AdamW for the rest)
learning_rate = 1e-3
weight_decay = 0.1
beta1 = 0.9
beta2 = 0.95
eps = 1e-8
grad_clip = 1.0              # 0: off
muon_lr = None               # None: learning_rate
muon_momentum = 0.95
muon_weight_decay = 0.0
muon_wd_decay = False        # Muon weight decay falls linearly to 0 over max_iters (Parcae Table 21)
muon_variant = 'torch'       # 'torch': torch.optim.Muon | 'parcae': Parcae Section Q.2's Muon (ParcaeMuon)
muon_beta2 = 0.95            # 'parcae': decay of the factored second moment of the update
muon_momentum_start = 0.85   # Muon momentum rises linearly from this to muon_momentum ...
muon_momentum_warmup = 0     # ... over this many iterations (0: constant; Parcae's code: 300)
update_clipping = False      # AdamW step / max(1, RMS(g / sqrt(v_hat))) per tensor (RDM recipe, Parcae Q.1)
adam_atan2 = False           # AdamW update atan2(m_hat, sqrt(v_hat)): no epsilon (RDM recipe, Parcae Q.1)
# schedule
schedule = 'cosine'          # 'cosine' | 'constant' | 'trapezoid' (constant, then linear cooldown)
warmup_iters = 100
max_iters = 1000
lr_decay_iters = None        # cosine: None = max_iters
min_lr = 1e-4
cooldown_frac = 0.5          # trapezoid: the last fraction of max_iters decays to min_lr
# system
device = 'auto'              # 'auto' | 'cpu' | 'cuda' | 'cuda:1' | 'mps'
dtype = 'auto'               # 'auto' (bf16 on CUDA, else fp32) | 'float32' | 'bfloat16' | 'float16'
compile = None               # None: on for CUDA
tf32 = None                  # CUDA TF32 matmuls; None: on unless dtype is 'float32' (then true FP32)
DEFAULTS = {k: v for k, v in globals().items() if not k.startswith('_') and isinstance(v, (int, float, bool, str, tuple, type(None)))}

# ----------------------------------------------------------------------------- models
MODELS = {  # name -> (module, model class, config class)
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


def resolve_config(argv, with_given=False):
    """Defaults < config files < --key=value, checked against train.py's keys and the model's fields
    (with_given: also the settings the user gave, config files included)."""
    given = parse_args(argv)
    name = given.get('model', DEFAULTS['model'])
    known = {**model_fields(name), **DEFAULTS}
    cfg = {**DEFAULTS, **check(given, known)}
    return (cfg, given) if with_given else cfg


CHECKS = {  # what train.py can run with (configurator.RANGES)
    'positive': ('batch_size', 'block_size', 'gradient_accumulation_steps', 'eval_interval', 'log_interval', 'eval_iters',
                 'hole_stride', 'learning_rate', 'eps', 'n_layer', 'n_head', 'n_embd', 'vocab_size', 'lr_decay_iters',
                 'muon_lr'),
    'non_negative': ('max_iters', 'warmup_iters', 'min_lr', 'weight_decay', 'grad_clip', 'muon_momentum', 'muon_weight_decay'),
    'fraction': ('p_synth', 'p_fill', 'p_hole', 'cooldown_frac', 'dropout'),
    'below_one': ('beta1', 'beta2'),
}
CHOICES = {'sampler': ('random', 'blocks'), 'schedule': ('cosine', 'constant', 'trapezoid'), 'optimizer': ('adamw', 'muon'),
           'muon_variant': ('torch', 'parcae')}
NONE_OR = {'compile': bool, 'tf32': bool, 'mask_id': int, 'vocab_size': int, 'lr_decay_iters': int, 'muon_lr': (int, float)}


def check_settings(cfg):
    check_values(cfg, CHECKS, CHOICES, NONE_OR)
    if cfg['mask_id'] is not None and cfg['mask_id'] < 0:
        raise ConfigError(f"mask_id must be None or a token id >= 0, got {cfg['mask_id']!r}")
    if not cfg['out_dir']:
        raise ConfigError("out_dir must name a folder, got ''")


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


CKPT_KEYS = ('model', 'model_name', 'model_args', 'config', 'iter_num')


def read_checkpoint(path, device='cpu'):
    """The checkpoint dict in an out_dir or a ckpt.pt file; a file torch cannot read, or one
    train.py did not write, is one line."""
    if os.path.isdir(path):
        path = os.path.join(path, 'ckpt.pt')
    if not os.path.isfile(path):
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


def spec_peak_flops(device, dtype):
    """The spec sheet's dense bf16/fp16 tensor-core peak of a known GPU, else None."""
    if str(device).startswith('cuda') and dtype in (torch.bfloat16, torch.float16):
        name = torch.cuda.get_device_name(device)
        specs = {'A100': 312e12, 'H100': 989e12, 'H200': 989e12, 'B200': 2250e12, 'RTX PRO 6000': 503e12}
        for key, flops in specs.items():
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
    return max(measure_peak_flops(device, d) for d in dtypes)


# ----------------------------------------------------------------------------- data
# ----------------------------------------------------------------------------- checkpoints
def save_checkpoint(path, ckpt):
    """Atomic: a crash mid-write leaves the previous ckpt.pt whole."""
    tmp = path + '.tmp'
    torch.save(ckpt, tmp)
    os.replace(tmp, path)


def log_jsonl(path, record):
    with open(path, 'a') as f:
        f.write(json.dumps(record) + '\n')


def resolve_device(device, dtype):
    """'auto' picks cuda when there is one, and bf16 where the GPU supports it: (device, torch
    dtype, autocast context). eval.py and bench.py choose the same way."""
    dev = ('cuda' if torch.cuda.is_available() else 'cpu') if device == 'auto' else str(device)
    check_device(dev)
    device_type = 'cuda' if dev.startswith('cuda') else ('mps' if dev.startswith('mps') else 'cpu')
    if dtype == 'auto':
        dtype = 'bfloat16' if device_type == 'cuda' and torch.cuda.is_bf16_supported() else 'float32'
    pt = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}.get(dtype)
    if pt is None:
        raise ConfigError(f"dtype must be auto, float32, bfloat16 or float16, got {dtype!r}")
    return dev, pt, nullcontext() if pt == torch.float32 else torch.autocast(device_type, dtype=pt)


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


def use_tf32(cfg, ptdtype):
    """TF32 for float32 matmuls on CUDA: the tf32 key, else on unless the run asked for float32
    (the workspace paper trains its small models in FP32; TF32 keeps only 10 mantissa bits)."""
    return cfg['tf32'] if cfg['tf32'] is not None else ptdtype != torch.float32


def fail(msg):
    """One line on stderr (from rank 0 only under torchrun: every rank meets the same mistake), exit 2."""
    if int(os.environ.get('RANK', 0)) == 0:
        print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def state_dict_error(e):
    """The first specific line of load_state_dict's error (a size mismatch, a missing key)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return (lines[1:] or lines or ['no detail'])[0][:300]


def load_weights(model, state, source):
    try:
        model.load_state_dict(state)
    except RuntimeError as e:  # a state dict of other shapes
        raise ConfigError(f"the weights in {source} do not fit this config's {type(model).__name__}: {state_dict_error(e)}")


def prepare_out_dir(cfg, given):
    """The checkpoint to resume (None for a new run), after the checks that keep a trained run
    safe: a new run never replaces out_dir's ckpt.pt unless told to, and a resumed run keeps the
    checkpoint's model, so model settings given now that differ from it stop here. Writes nothing."""
    ckpt_path = os.path.join(cfg['out_dir'], 'ckpt.pt')
    if cfg['init_from'] != 'resume':
        if os.path.exists(ckpt_path) and cfg['eval_only']:
            raise ConfigError(f"--eval_only=True with init_from={cfg['init_from']!r} would evaluate a fresh model, not the "
                              f"trained {ckpt_path}: pass --init_from=resume to evaluate it")
        if os.path.exists(ckpt_path) and not cfg['overwrite']:
            raise ConfigError(f"{ckpt_path} holds a trained run: continue it with --init_from=resume, start this run in "
                              f"another --out_dir, or replace it (and its log) with --overwrite=True")
        return None
    if not os.path.isfile(ckpt_path):
        raise ConfigError(f"init_from='resume' but there is no checkpoint at {ckpt_path} "
                          f"(a new run: leave init_from at 'scratch')")
    ckpt = read_checkpoint(ckpt_path)
    missing = [k for k in ('optimizers', 'scaler', 'rng', 'best_val_loss') if k not in ckpt]
    if missing:
        raise ConfigError(f"{ckpt_path} cannot be resumed (it lacks {', '.join(missing)}); "
                          f"start a new run from its weights with --init_from={cfg['out_dir']} --out_dir=...")
    if ckpt['model_name'] != cfg['model']:
        raise ConfigError(f"{ckpt_path} holds a '{ckpt['model_name']}' model but this config builds '{cfg['model']}'")
    args = ckpt['model_args']
    mine = {k: v for k, v in given.items() if k in args and v is not None}   # None: derived, as it was
    try:    # compared as the model config holds them (derived fields, an int for a per-layer tuple)
        c = model_classes(cfg['model'])[1](**{**args, **mine})
        now = {k: getattr(c, k) for k in mine}
    except (ValueError, TypeError, AssertionError, ZeroDivisionError):
        now = mine
    differ = [k for k in mine if now[k] != args[k]]
    if differ:
        raise ConfigError("resume keeps the checkpoint's model, and these settings differ from it: " +
                          ', '.join(f"{k}={given[k]!r} (checkpoint: {args[k]!r})" for k in differ) +
                          "; drop them, or start a new run in another --out_dir")
    cfg.update({k: v for k, v in args.items() if k in cfg or k in model_fields(cfg['model'])})
    return ckpt


def trim_log(path, iter_num):
    """A resumed run continues its log from the checkpoint: records of iterations at or past
    iter_num (written after the checkpoint by the interrupted run) go, so none appears twice."""
    if not os.path.isfile(path):
        return
    keep = []
    for line in open(path):
        try:
            rec = json.loads(line)
        except ValueError:      # a line cut short by a kill
            continue
        if isinstance(rec, dict) and rec.get('iter', -1) < iter_num:
            keep.append(json.dumps(rec) + '\n')
    with open(path + '.tmp', 'w') as f:
        f.writelines(keep)
    os.replace(path + '.tmp', path)


# ----------------------------------------------------------------------------- main
def print_sizes(cfg):
    """Parameters and FLOPs of a config, built on the meta device: no data, no memory."""
    cfg['vocab_size'] = dataset_vocab(cfg, read_meta(cfg))[0]
    with torch.device('meta'):
        m = build_model(cfg['model'], cfg)
    print(f"model: {cfg['model']}")
    print(f"parameters: {m.num_params()}")
    print(f"flops_per_token: {m.flops_per_token(cfg['block_size']):.0f}")


def load_data(cfg, master, ddp, rank, world):
    """(meta, Batches) once every stream is checked. The synthetic battery is made on the spot,
    so python train.py works offline."""
    ds_dir = os.path.join(cfg['data_dir'], cfg['dataset'])
    if cfg['dataset'] == 'synthetic' and not os.path.isfile(os.path.join(ds_dir, 'meta.json')):
        if master:
            import prepare_data
            try:
                prepare_data.prepare('synthetic', out_dir=cfg['data_dir'])
            except OSError as e:
                raise ConfigError(f"cannot write the synthetic data under data_dir {cfg['data_dir']}: {e.strerror or e}")
        if ddp:
            torch.distributed.barrier()
    meta = read_meta(cfg)
    if meta is None:
        raise ConfigError(f"{ds_dir}/meta.json not found: prepare the data first (python prepare_data.py {cfg['dataset']})")
    cfg['vocab_size'], mask = dataset_vocab(cfg, meta)
    streams = [ds_dir] + ([os.path.join(cfg['data_dir'], cfg['synth_dataset'])] if cfg['p_synth'] > 0 else [])
    for d in streams:
        for split in ('train', 'val'):
            if os.path.isfile(os.path.join(d, f'{split}.bin')):   # Batches names a missing one
                check_tokens(os.path.join(d, f'{split}.bin'), cfg['block_size'] + 2, cfg['vocab_size'])
    return meta, Batches(cfg, rank, world, mask)


def start_model(cfg, ckpt, master):
    """The model with the checkpoint's weights (resume), another run's (init_from=DIR) or fresh
    ones. A new run starts its own log in out_dir; a resumed one trims its log to the checkpoint."""
    model = build_model(cfg['model'], cfg)
    if ckpt is not None:
        load_weights(model, ckpt['model'], os.path.join(cfg['out_dir'], 'ckpt.pt'))
    elif cfg['init_from'] != 'scratch':
        src = read_checkpoint(cfg['init_from'])
        if src['model_name'] != cfg['model']:
            raise ConfigError(f"init_from={cfg['init_from']} holds a '{src['model_name']}' model, not '{cfg['model']}'")
        load_weights(model, src['model'], cfg['init_from'])
    if master and not cfg['eval_only']:
        log_path = os.path.join(cfg['out_dir'], 'log.jsonl')
        try:
            os.makedirs(cfg['out_dir'], exist_ok=True)
            if ckpt is None:
                open(log_path, 'w').close()
            else:
                trim_log(log_path, ckpt['iter_num'])
            json.dump(cfg, open(os.path.join(cfg['out_dir'], 'config.json'), 'w'), indent=1, default=str)
        except OSError as e:
            raise ConfigError(f"cannot write to out_dir {cfg['out_dir']}: {e.strerror or e}")
    return model


@torch.no_grad()
def estimate_loss(model, batches, cfg, dev, autocast):
    """Mean train and val loss over eval_iters fixed batches. Under torchrun every rank must take
    the same checkpoint/NaN decision (saving is collective), so the means are averaged over ranks,
    which also evaluates on world x eval_iters batches."""
    model.eval()
    losses = torch.zeros(2, cfg['eval_iters'], device=dev)   # on dev: nccl reduces only CUDA tensors
    for i, split in enumerate(('train', 'val')):
        for k in range(cfg['eval_iters']):
            x, y, _ = batches.get(split, -1 - k)   # negative iterations: a fixed eval set
            with autocast:
                _, loss = model(x.to(dev), y.to(dev))
            losses[i, k] = loss.float()
    mean = losses.mean(dim=1)
    if torch.distributed.is_initialized():
        torch.distributed.all_reduce(mean)
        mean /= torch.distributed.get_world_size()
    model.train()
    return {'train': mean[0].item(), 'val': mean[1].item()}


def save_run(cfg, model, opts, scaler, meta, it, best_val):
    """ckpt.pt with all an exact resume needs, every rank's RNG state included (collective)."""
    rng = [torch.get_rng_state()]
    if torch.distributed.is_initialized():
        rng = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(rng, torch.get_rng_state())
    if int(os.environ.get('RANK', 0)) == 0:
        model_args = {f.name: getattr(model.config, f.name) for f in dataclasses.fields(model.config)}
        save_checkpoint(os.path.join(cfg['out_dir'], 'ckpt.pt'), {
            'model': model.state_dict(), 'optimizers': [o.state_dict() for o in opts],
            'scaler': scaler.state_dict(), 'model_name': cfg['model'], 'model_args': model_args,
            'config': cfg, 'meta': meta, 'iter_num': it, 'best_val_loss': best_val, 'rng': rng})


def diverged(what, cfg, last_good):
    fail(f"{what}; {os.path.join(cfg['out_dir'], 'ckpt.pt')} still holds the last good state (iter {last_good}); "
         f"resume with --init_from=resume and a lower learning_rate")


def main(argv):
    try:
        cfg, given = resolve_config(argv, with_given=True)
        check_settings(cfg)
        if cfg['dry_run']:
            return print_sizes(cfg)
    except ConfigError as e:
        fail(e)

    # --- distributed setup; every check that needs no data comes before any process waits for another
    ddp = int(os.environ.get('RANK', -1)) != -1
    rank, local_rank, world = [int(os.environ[k]) for k in ('RANK', 'LOCAL_RANK', 'WORLD_SIZE')] if ddp else (0, 0, 1)
    try:
        dev, ptdtype, autocast = resolve_device(cfg['device'], cfg['dtype'])
        if ddp and dev.startswith('cuda'):
            dev = f'cuda:{local_rank}'
            check_device(dev)
        if split_batch(cfg, world) is None:
            raise ConfigError(split_hint(cfg, world))
        ckpt = prepare_out_dir(cfg, given)
    except ConfigError as e:
        fail(e)
    if ddp:
        torch.distributed.init_process_group(backend='nccl' if dev.startswith('cuda') else 'gloo')
        if dev.startswith('cuda'):
            torch.cuda.set_device(dev)
    master = rank == 0
    micro_batch, accum = split_batch(cfg, world)
    device_type = 'cuda' if dev.startswith('cuda') else ('mps' if dev.startswith('mps') else 'cpu')
    use_compile = cfg['compile'] if cfg['compile'] is not None else device_type == 'cuda'
    torch.manual_seed(cfg['seed'] + rank)
    tf32 = device_type == 'cuda' and use_tf32(cfg, ptdtype)
    if device_type == 'cuda':
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32

    # --- data, model, optimizers; a resumed run restores the optimizers, the scaler and its RNG
    try:
        meta, batches = load_data(cfg, master, ddp, rank, world)
        raw_model = start_model(cfg, ckpt, master).to(dev)
    except ConfigError as e:
        fail(e)
    knobs = knob_names(raw_model)
    opts = make_optimizers(raw_model, cfg, device_type)
    scaler = torch.amp.GradScaler(device_type, enabled=ptdtype == torch.float16)
    iter_num, best_val = 0, float('inf')
    if ckpt is not None:
        for opt, state in zip(opts, ckpt['optimizers']):
            opt.load_state_dict(state)
        scaler.load_state_dict(ckpt['scaler'])
        torch.set_rng_state(ckpt['rng'][rank % len(ckpt['rng'])])
        iter_num, best_val = ckpt['iter_num'], ckpt['best_val_loss']
    del ckpt    # its tensors
    model = torch.compile(raw_model) if use_compile else raw_model
    if ddp:
        # a model whose parts sit out some steps (FON's revision organ without holes) says so
        unused = getattr(raw_model, 'ddp_find_unused_parameters', False)
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if device_type == 'cuda' else None,
                                                          find_unused_parameters=unused)

    log_path = os.path.join(cfg['out_dir'], 'log.jsonl')
    tokens_per_iter = cfg['batch_size'] * cfg['block_size'] * cfg['gradient_accumulation_steps']
    flops_per_iter = raw_model.flops_per_token(cfg['block_size']) * tokens_per_iter
    spec = spec_peak_flops(dev, ptdtype)
    peak = (spec or peak_flops(dev, ptdtype)) * world
    if master:
        print(f"model {cfg['model']}: {raw_model.num_params():,} parameters, {tokens_per_iter:,} tokens/iter "
              f"({world} x {accum} x {micro_batch} x {cfg['block_size']}), device {dev}, "
              f"dtype {str(ptdtype)[6:]}, tf32 {tf32}, compile {use_compile}, world {world}")
        print(f"mfu against {peak / 1e12:.3g} TFLOP/s: " + ("the spec sheet's dense peak" if spec else
              "the best matmul rate measured now, raised to any faster rate this run reaches (so at most 100%)"))

    # --- the loop
    model.train()
    t0 = time.time()
    last_good, first_iter = None, iter_num
    while True:
        lr = set_schedule(opts, iter_num, cfg)
        # a resumed run evaluates where it starts, as its log was trimmed there
        if iter_num % cfg['eval_interval'] == 0 or iter_num in (cfg['max_iters'], first_iter) or cfg['eval_only']:
            losses = estimate_loss(model, batches, cfg, dev, autocast)
            if master:
                print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
            if cfg['eval_only']:    # evaluation writes nothing
                break
            if master:
                log_jsonl(log_path, {'kind': 'eval', 'iter': iter_num, 'train_loss': losses['train'],
                                     'val_loss': losses['val'], 'tokens': iter_num * tokens_per_iter})
            if not all(math.isfinite(v) for v in losses.values()):
                diverged(f"eval loss is not finite at iter {iter_num}", cfg, last_good)
            if losses['val'] < best_val or cfg['always_save_checkpoint']:
                best_val = min(best_val, losses['val'])
                save_run(cfg, raw_model, opts, scaler, meta, iter_num, best_val)
                last_good = iter_num
        if iter_num >= cfg['max_iters']:
            break

        for micro in range(accum):
            x, y, holes = batches.get('train', iter_num, micro)
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            kw = {'holes': holes.to(dev)} if holes is not None and 'holes' in knobs else {}
            if ddp:  # sync gradients only on the last micro-step
                model.require_backward_grad_sync = micro == accum - 1
            with autocast:
                _, loss = model(x, y, **kw)
                loss = loss / accum
            scaler.scale(loss).backward()
        if cfg['grad_clip'] > 0:
            for opt in opts:
                scaler.unscale_(opt)
            norm = torch.nn.utils.clip_grad_norm_(raw_model.parameters(), cfg['grad_clip'])
        for opt in opts:
            scaler.step(opt)
        scaler.update()
        for opt in opts:
            opt.zero_grad(set_to_none=True)

        if iter_num % cfg['log_interval'] == 0 and master:
            lossf = loss.item() * accum
            if not math.isfinite(lossf):
                diverged(f"training loss is {lossf} at iter {iter_num}", cfg, last_good)
            t1 = time.time()
            dt = (t1 - t0) / (cfg['log_interval'] if iter_num > 0 else 1)
            t0 = t1
            if spec is None:    # a measured peak is at least any rate the run reaches
                peak = max(peak, flops_per_iter / dt)
            rec = {'kind': 'train', 'iter': iter_num, 'loss': lossf, 'lr': lr, 'ms': dt * 1000,
                   'tokens_per_s': tokens_per_iter / dt, 'mfu': flops_per_iter / dt / peak}
            if cfg['grad_clip'] > 0:
                rec['grad_norm'] = norm.item()
            if hasattr(raw_model, 'train_stats'):
                rec.update(raw_model.train_stats())
            extra = ''.join(f", {k} {v:.4g}" for k, v in rec.items() if k not in ('kind', 'iter', 'loss', 'lr', 'ms', 'tokens_per_s', 'mfu'))
            print(f"iter {iter_num}: loss {lossf:.4f}, lr {lr:.2e}, {dt * 1000:.1f}ms, "
                  f"{rec['tokens_per_s']:.0f} tok/s, mfu {100 * rec['mfu']:.2f}%{extra}")
            log_jsonl(log_path, rec)
        iter_num += 1

    if ddp:
        # leave together, and free DDP (which holds the process group) before the group goes: a
        # gloo rank that tore the group down while main() returned hung its peer now and then
        torch.distributed.barrier()
        del model
        torch.distributed.destroy_process_group()


if __name__ == '__main__':
    main(sys.argv[1:])
