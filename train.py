"""
The one trainer, for every model in the repo. Read top to bottom, a training step comes first:
the defaults, get_batch, the optimizers and their schedule, then the loop in train(); below it
come the phases train() calls (setup, build, logging) and the details of the data and the machine.

    python train.py                                     # small GPT on the offline synthetic battery
    python train.py config/parcae_140m.py --batch_size=16
    torchrun --standalone --nproc_per_node=8 train.py config/parcae_140m.py
    python train.py config/parcae_140m.py --dry_run=True  # parameters, FLOPs, will it fit on a GPU?

A config file is plain Python assignments to the keys below or to fields of the chosen model's
config dataclass. One iteration sees batch_size * gradient_accumulation_steps sequences of
block_size tokens on any number of processes: torchrun shares them out (gradient_accumulation_steps
/ world_size micro-steps each, as in nanoGPT, or smaller micro-batches where that does not divide).

A new run never replaces a trained one: into an out_dir that holds ckpt.pt it needs
--init_from=resume (continue), another --out_dir, or --overwrite=True. --eval_only=True writes nothing.
A mistake is one line, `error: ...` (exit 2); under torchrun it is printed above torchrun's own
ChildFailedError report, which repeats the exit code only. Ctrl-C, SIGTERM (a scheduler ending a
job) and SIGHUP stop with one line that names the iteration and the command that continues (exit
130, 143, 129).
"""
import dataclasses
import functools
import json
import math
import os
import sys
import time
import types
import zlib

import numpy as np
import torch

import run_folder
from configurator import ConfigError, check, check_settings, defaults_of, fail, parse_args
from fon import make_holes
from models import (build_model, check_device, estimate_memory, model_classes, model_fields, peak_flops, resolve_device,
                    spec_peak_flops, use_tf32)
from parcae import ParcaeMuon, StableAdamW
from prepare_data import (check_data, check_tokens, data_record, dataset_vocab, example_starts, get_tokenizer, prepare,
                          prepare_hint, read_meta, stream_record)

# ----------------------------------------------------------------------------- defaults
# I/O
out_dir = 'out'
eval_interval = 250
log_interval = 10
eval_iters = 20
eval_only = False
always_save_checkpoint = True
wandb_log = False            # also log every log.jsonl record to Weights & Biases (pip install wandb)
wandb_project = 'looped-lm'
wandb_run_name = ''          # '': the out_dir's name
init_from = 'scratch'        # 'scratch' | 'resume' (from out_dir) | a directory whose ckpt.pt gives the weights
overwrite = False            # a new run (init_from not 'resume') may replace out_dir's ckpt.pt and log.jsonl
dry_run = False              # build on the meta device, print parameters, flops_per_token and peak memory, exit
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
loss_on = 'all'              # 'all' tokens | 'answers': only the answer spans of a synthetic set ({split}_answers.bin)
causal = True                # False (GPT only, needs p_fill > 0): full attention, the loss at the holes only (a
                             # BERT-style masked-reconstruction encoder); its eval sets are holed and scored there
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
DEFAULTS = defaults_of(globals())


# ----------------------------------------------------------------------------- data
@dataclasses.dataclass
class Data:
    """What get_batch reads and where its batches go: the config, the opened streams (name ->
    (token memmap, answer marks or None)), the MASK id, this process's rank of world, the device,
    and the model's knobs; meta and record are what a checkpoint keeps of the data."""
    cfg: dict
    streams: dict
    mask: int = None
    rank: int = 0
    world: int = 1
    dev: str = 'cpu'
    knobs: tuple = ()
    meta: dict = None
    record: dict = None


def get_batch(split, it, micro, data):
    """(x, y, kw) for micro-step micro of iteration it on this process (eval sets: negative it), on
    the device: the inputs, the targets and the forward's keywords (FON's holes; a causal=False
    run's full attention, with the loss at its holes alone)."""
    x, y, holes = draw_batch(split, it, micro, data.cfg, data.streams, data.mask, data.rank, data.world)
    kw = {}
    if not data.cfg['causal']:
        y, kw = hole_targets(y, holes), {'causal': False}
    elif holes is not None and holes.any() and 'holes' in data.knobs:
        # a batch without holes passes none (holes is on the CPU here: no device sync), so the
        # model's hole stream does not run and its own parameters get no gradient
        kw = {'holes': to_device(holes, data.dev)}
    return to_device(x, data.dev), to_device(y, data.dev), kw


def hole_targets(y, holes):
    """A causal=False run's targets: the hole's token at a hole, ignored (-1) everywhere else,
    where full attention sees the next token in the input (a batch without holes scores 0)."""
    return y.masked_fill(~holes, -1)


def to_device(t, dev):
    """A host tensor on dev. On CUDA it is pinned first: a non_blocking copy from pageable memory
    waits for the copy, one from pinned memory overlaps the step that runs."""
    if dev.startswith('cuda'):
        t = t.pin_memory()
    return t.to(dev, non_blocking=True)


# ----------------------------------------------------------------------------- optimizers and their schedule
def configure_optimizers(model, cfg, device_type):
    """AdamW, plus Muon for the hidden matrices when optimizer='muon': the model's own groups when
    it has optim_groups() (Parcae), else by shape. The recipe keys cfg lacks take train.py's
    defaults. Muon is torch.optim.Muon or the Parcae paper's (muon_variant='parcae'); AdamW with
    update clipping or atan2 is the RDM recipe's (Parcae Q.1)."""
    cfg = {**DEFAULTS, **cfg}
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


def get_lr(it, cfg):
    """The learning rate at iteration it as a fraction of the peak: linear warmup, then cosine to
    min_lr, constant, or trapezoid (constant, then a linear cooldown over cooldown_frac)."""
    warm, floor = cfg['warmup_iters'], cfg['min_lr'] / cfg['learning_rate']
    if it < warm:
        return (it + 1) / (warm + 1)
    if cfg['schedule'] == 'constant':
        return 1.0
    if cfg['schedule'] == 'trapezoid':
        start = cfg['max_iters'] * (1 - cfg['cooldown_frac'])
        if it < start:
            return 1.0
        return 1.0 - (1.0 - floor) * min(1.0, (it - start) / max(1.0, cfg['max_iters'] - start))
    decay = cfg['lr_decay_iters'] or cfg['max_iters']
    if it >= decay:
        return floor
    ratio = (it - warm) / max(1, decay - warm)
    return floor + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (1.0 - floor)


def set_schedule(opts, it, cfg):
    """Every optimizer's rates at iteration it, from the config alone (so a resumed run may change
    them); Muon's weight decay falls to 0 over the run (muon_wd_decay) and its momentum warms up
    from muon_momentum_start (Parcae Table 21). A group may carry an 'lr_scale' (optim_groups)."""
    mult = get_lr(it, cfg)
    for k, opt in enumerate(opts):
        peak = cfg['learning_rate'] if k == 0 else (cfg['muon_lr'] or cfg['learning_rate'])
        for g in opt.param_groups:
            g['lr'] = peak * mult * g.get('lr_scale', 1.0)
            if k == 1:
                g['weight_decay'] = cfg['muon_weight_decay'] * (max(0.0, 1.0 - it / cfg['max_iters']) if cfg['muon_wd_decay'] else 1.0)
                warm = min(1.0, it / cfg['muon_momentum_warmup']) if cfg['muon_momentum_warmup'] > 0 else 1.0
                g['momentum'] = cfg['muon_momentum_start'] + warm * (cfg['muon_momentum'] - cfg['muon_momentum_start'])
    return mult * cfg['learning_rate']


# ----------------------------------------------------------------------------- the run
def train(argv, run):
    """One run, as its config says: the settings, the processes and the device, the data, model and
    optimizers, then the loop. run (a run_folder.Run) learns how far it got, for what a stop reports."""
    cfg, given, wandb = settings(argv)
    if cfg['dry_run']:
        return print_sizes(cfg, given)
    env, ckpt = setup(cfg, given, run)
    data, raw_model, opts, scaler, iter_num, best_val = build(cfg, env, ckpt, run)
    del ckpt    # its tensors
    model = wrap(raw_model, env)   # compiled, and under torchrun in DDP
    log = Log(cfg, env, data, raw_model, wandb)

    model.train()
    first_iter = iter_num
    batch = get_batch('train', iter_num, 0, data) if iter_num < cfg['max_iters'] else None
    while True:
        run.iter = iter_num
        lr = set_schedule(opts, iter_num, cfg)
        # a resumed run evaluates where it starts, as its log was trimmed there
        if iter_num % cfg['eval_interval'] == 0 or iter_num in (cfg['max_iters'], first_iter) or cfg['eval_only']:
            losses = estimate_loss(model.module if env.ddp else model, data, env.autocast)
            log.eval(iter_num, losses)
            if cfg['eval_only']:    # evaluation writes nothing
                break
            if not all(math.isfinite(v) for v in losses.values()):
                run_folder.diverged(f"eval loss is not finite at iter {iter_num}", run)
            if losses['val'] < best_val or cfg['always_save_checkpoint']:
                best_val = min(best_val, losses['val'])
                run_folder.save(run, raw_model, opts, scaler, data.meta, iter_num, best_val, data.record)
        if iter_num >= cfg['max_iters']:
            break

        for micro in range(env.accum):
            x, y, kw = batch
            if env.ddp:  # sync gradients only on the last micro-step
                model.require_backward_grad_sync = micro == env.accum - 1
            with env.autocast:
                loss = model(x, y, **kw)[1] / env.accum   # the logits are not kept: at 32k vocab they are GBs
            # the next micro-step's batch (after the last, the next iteration's first) is read and sent
            # while the device runs this step, as nanoGPT does; a batch depends only on where it falls
            it, m = (iter_num, micro + 1) if micro + 1 < env.accum else (iter_num + 1, 0)
            batch = get_batch('train', it, m, data) if it < cfg['max_iters'] else None
            scaler.scale(loss).backward()
        norm = None
        if cfg['grad_clip'] > 0:
            for opt in opts:
                scaler.unscale_(opt)
            norm = torch.nn.utils.clip_grad_norm_(raw_model.parameters(), cfg['grad_clip'])
        for opt in opts:
            scaler.step(opt)
        scaler.update()
        for opt in opts:
            opt.zero_grad(set_to_none=True)

        if iter_num % cfg['log_interval'] == 0 and env.master:
            lossf = loss.item() * env.accum
            if not math.isfinite(lossf):
                run_folder.diverged(f"training loss is {lossf} at iter {iter_num}", run)
            log.train(iter_num, lossf, lr, norm)
        iter_num += 1
    if env.master and not cfg['eval_only']:
        print(f"done: {os.path.join(cfg['out_dir'], 'ckpt.pt')} holds iter {run.last_good} (best val loss {best_val:.4f}); "
              f"next: python sample.py --out_dir={cfg['out_dir']}  or  python -m tools.eval --out_dir={cfg['out_dir']}")
    if env.ddp:
        # leave together, and free DDP (which holds the process group) before the group goes: a
        # gloo rank that tore the group down while main() returned hung its peer now and then
        torch.distributed.barrier()
        del model
        torch.distributed.destroy_process_group()


def main(argv):
    """python train.py ARGS: one run, stopped by Ctrl-C or a signal with one line (run_folder.guard)."""
    run = run_folder.Run()
    run_folder.guard(run, lambda: train(argv, run))


# ----------------------------------------------------------------------------- the phases of a run, and their helpers
def settings(argv):
    """(cfg, the settings the user gave, wandb or None), checked before anything is built."""
    try:
        cfg, given = resolve_config(argv, with_given=True)
        check_settings(cfg)
        check_dataset(cfg, given)
        return cfg, given, import_wandb() if cfg['wandb_log'] and not cfg['dry_run'] else None
    except ConfigError as e:
        fail(e)


def resolve_config(argv, with_given=False):
    """train.py's defaults < config files < --key=value, checked against train.py's keys and the
    model's fields (with_given: also the settings the user gave, config files included). A given
    shape key the model has no field for is refused: it would change nothing."""
    defaults = DEFAULTS
    given = parse_args(argv)
    name = given.get('model') or (given.get('init_from') == 'resume' and run_folder.run_model(given.get('out_dir', defaults['out_dir'])))
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


# train.py's shape defaults: they apply to a model that has such a field, and a model without
# one refuses the key when it is given
SHAPE_KEYS = ('n_layer', 'n_head', 'n_embd', 'dropout')


def check_dataset(cfg, given):
    """The data a run names is there, before out_dir is looked at (so a typo'd --dataset is what
    a command into a trained run's out_dir hears of). The synthetic battery is made on the spot;
    a resume's data is its checkpoint's, and a dry run reads none."""
    if cfg['dry_run'] or (cfg['init_from'] == 'resume' and 'dataset' not in given):
        return
    if cfg['dataset'] != 'synthetic' and read_meta(cfg) is None:
        raise ConfigError(no_data(cfg))


def no_data(cfg):
    return (f"{os.path.join(cfg['data_dir'], cfg['dataset'])} holds no data (meta.json, or nanoGPT's train.bin with or "
            f"without meta.pkl): prepare the data first ({prepare_hint(cfg['dataset'])})")


def setup(cfg, given, run):
    """The processes (torchrun) and the device; every check that needs no data, out_dir's included,
    comes before any process waits for another. Returns (env, the checkpoint to resume or None)."""
    ddp = int(os.environ.get('RANK', -1)) != -1
    rank, local_rank, world = [int(os.environ[k]) for k in ('RANK', 'LOCAL_RANK', 'WORLD_SIZE')] if ddp else (0, 0, 1)
    try:
        dev, ptdtype, autocast = resolve_device(cfg['device'], cfg['dtype'])
        if ddp and dev.startswith('cuda'):
            dev = f'cuda:{local_rank}'
            check_device(dev)
        ckpt = run_folder.check_run_folder(run, cfg, given, DEFAULTS)
        if split_batch(cfg, world) is None:
            raise ConfigError(split_hint(cfg, world, given, ckpt))
    except ConfigError as e:
        fail(e)
    if ddp:
        torch.distributed.init_process_group(backend='nccl' if dev.startswith('cuda') else 'gloo')
        if dev.startswith('cuda'):
            torch.cuda.set_device(dev)
    micro_batch, accum = split_batch(cfg, world)
    device_type = 'cuda' if dev.startswith('cuda') else ('mps' if dev.startswith('mps') else 'cpu')
    torch.manual_seed(cfg['seed'] + rank)
    threads = cpu_threads() if device_type == 'cpu' else None
    tf32 = device_type == 'cuda' and use_tf32(cfg, ptdtype)
    if device_type == 'cuda':
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    env = types.SimpleNamespace(ddp=ddp, rank=rank, local_rank=local_rank, world=world, master=rank == 0, dev=dev,
                                device_type=device_type, ptdtype=ptdtype, autocast=autocast, tf32=tf32, threads=threads,
                                micro_batch=micro_batch, accum=accum,
                                compile=cfg['compile'] if cfg['compile'] is not None else device_type == 'cuda')
    return env, ckpt


def build(cfg, env, ckpt, run):
    """The data, the model (the checkpoint's weights on resume, another run's with init_from=DIR, or
    fresh ones), its optimizers and the fp16 scaler. Every check (the data, the weights, the
    optimizer and scaler states, the world size) comes before anything is written, so a refused
    command changes nothing; then rank 0 claims out_dir. Also returns the iteration and the best val
    loss the run starts from."""
    err = None
    try:
        data = load_data(cfg, ckpt.get('data') if ckpt else None, env.rank, env.world, env.dev, env.ddp, run.given.argv)
        raw_model = build_model(cfg['model'], cfg)
        run_folder.load_start(raw_model, cfg, ckpt)
        raw_model.to(env.dev)
        opts = configure_optimizers(raw_model, cfg, env.device_type)
        scaler = torch.amp.GradScaler(env.device_type, enabled=env.ptdtype == torch.float16)
        if ckpt is not None:
            run_folder.restore_states(opts, scaler, ckpt, os.path.join(cfg['out_dir'], 'ckpt.pt'))
            if not cfg['eval_only']:
                xy = draw_batch('train', ckpt['iter_num'], 0, cfg, data.streams, data.mask)[:2]
                run_folder.check_world(cfg, run.given, ckpt, raw_model, xy, env.world)
    except ConfigError as e:
        err = str(e)
    try:
        agree(err, env.ddp)
        if env.master and not cfg['eval_only']:   # a new run starts its own log; a resumed one trims its log to the checkpoint
            try:
                run_folder.claim_run_folder(run, ckpt)
            except ConfigError as e:
                err = str(e)
        agree(err, env.ddp)
    except ConfigError as e:
        fail(e)
    return (data, raw_model, opts, scaler) + resume_point(ckpt, env)


def resume_point(ckpt, env):
    """(iteration, best val loss) a run starts from; a resumed run's random generators as they were."""
    if ckpt is None:
        return 0, float('inf')
    torch.set_rng_state(ckpt['rng'][env.rank % len(ckpt['rng'])])
    cuda_rng = ckpt.get('cuda_rng', [None])[env.rank % len(ckpt.get('cuda_rng', [None]))]
    if env.device_type == 'cuda' and cuda_rng is not None:
        torch.cuda.set_rng_state(cuda_rng.cpu(), env.dev)
    return ckpt['iter_num'], ckpt['best_val_loss']


def wrap(raw_model, env):
    """The model the loop runs: compiled (compile), and under torchrun wrapped in DDP."""
    model = torch.compile(raw_model) if env.compile else raw_model
    if env.ddp:
        # a model whose parts sit out some steps (FON's revision organ without holes) says so
        unused = getattr(raw_model, 'ddp_find_unused_parameters', False)
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[env.local_rank] if env.device_type == 'cuda'
                                                          else None, find_unused_parameters=unused)
    return model


def agree(err, ddp):
    """Under torchrun a mistake any rank met stops every rank (rank 0 prints it), so no rank is left
    waiting on a peer that exited; err: this rank's message or None."""
    errs = [err]
    if ddp:
        errs = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(errs, err)
    first = next((e for e in errs if e), None)
    if first:
        raise ConfigError(first)


class Log:
    """What a run prints and writes to out_dir/log.jsonl (and wandb): a header, each eval, and every
    log_interval-th step with its loss, learning rate, time, tokens/s and MFU."""

    def __init__(self, cfg, env, data, raw_model, wandb):
        self.cfg, self.env, self.model = cfg, env, raw_model
        self.path = os.path.join(cfg['out_dir'], 'log.jsonl')
        self.tokens_per_iter = cfg['batch_size'] * cfg['block_size'] * cfg['gradient_accumulation_steps']
        self.flops_per_iter = raw_model.flops_per_token(cfg['block_size']) * self.tokens_per_iter
        self.spec = spec_peak_flops(env.dev, env.ptdtype)
        self.peak = (self.spec or peak_flops(env.dev, env.ptdtype)) * env.world
        meta = data.meta
        if env.master:
            print(f"model {cfg['model']}: {raw_model.num_params():,} parameters, {self.tokens_per_iter:,} tokens/iter "
                  f"({env.world} x {env.accum} x {env.micro_batch} x {cfg['block_size']}), device {env.dev}, "
                  f"dtype {str(env.ptdtype)[6:]}, tf32 {env.tf32}, compile {env.compile}, world {env.world}")
            print(f"data {os.path.join(cfg['data_dir'], cfg['dataset'])}: {meta.get('layout', 'meta.json')}, "
                  f"vocab {meta['vocab_size']}")
            if env.threads:
                print(env.threads)
            print(f"mfu against {self.peak / 1e12:.3g} TFLOP/s: " + ("the spec sheet's dense peak" if self.spec else
                  "the best matmul rate measured now, raised to any faster rate this run reaches (so at most 100%)"))
        if wandb is not None and env.master and not cfg['eval_only']:
            wandb.init(project=cfg['wandb_project'], config=cfg,
                       name=cfg['wandb_run_name'] or os.path.basename(os.path.abspath(cfg['out_dir'])))
        else:
            wandb = None
        self.wandb, self.t0 = wandb, time.time()

    def eval(self, iter_num, losses):
        if not self.env.master:
            return
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        if not self.cfg['eval_only']:
            log_jsonl(self.path, {'kind': 'eval', 'iter': iter_num, 'train_loss': losses['train'],
                                  'val_loss': losses['val'], 'tokens': iter_num * self.tokens_per_iter}, self.wandb)

    def train(self, iter_num, lossf, lr, norm):
        t1 = time.time()
        dt = (t1 - self.t0) / (self.cfg['log_interval'] if iter_num > 0 else 1)
        self.t0 = t1
        if self.spec is None:    # a measured peak is at least any rate the run reaches
            self.peak = max(self.peak, self.flops_per_iter / dt)
        rec = {'kind': 'train', 'iter': iter_num, 'loss': lossf, 'lr': lr, 'ms': dt * 1000,
               'tokens_per_s': self.tokens_per_iter / dt, 'mfu': self.flops_per_iter / dt / self.peak}
        if norm is not None:
            rec['grad_norm'] = norm.item()
        if self.env.device_type == 'cuda':
            rec['peak_mem_gb'] = torch.cuda.max_memory_allocated(self.env.dev) / 2 ** 30
        if hasattr(self.model, 'train_stats'):
            rec.update(self.model.train_stats())
        extra = ''.join(f", {k} {v:.4g}" for k, v in rec.items() if k not in ('kind', 'iter', 'loss', 'lr', 'ms', 'tokens_per_s', 'mfu'))
        print(f"iter {iter_num}: loss {lossf:.4f}, lr {lr:.2e}, {dt * 1000:.1f}ms, "
              f"{rec['tokens_per_s']:.0f} tok/s, mfu {100 * rec['mfu']:.2f}%{extra}")
        log_jsonl(self.path, rec, self.wandb)


@torch.no_grad()
def estimate_loss(model, data, autocast):
    """Mean train and val loss over the eval_iters fixed batches of batch_size sequences (the same
    set at any world size: under torchrun each rank scores every world-th batch, and the sums are
    reduced, so every rank takes the same checkpoint/NaN decision). A causal=False run's is the
    mean over all the holes of its holed eval batches, a loss_on='answers' run's the mean over all
    their answer tokens. model: the model without its DDP wrapper (the ranks score different batches)."""
    cfg = data.cfg
    model.eval()
    sums = torch.zeros(2, 2, device=data.dev)     # (train, val) x (loss sum, weight); on dev: nccl reduces only CUDA tensors
    for i, split in enumerate(('train', 'val')):
        for k in range(data.rank, cfg['eval_iters'], data.world):
            x, y, kw = get_batch(split, -1 - k, 0, data)
            n = int((y != -1).sum()) if cfg['loss_on'] == 'answers' or not cfg['causal'] else 1
            if n:
                with autocast:
                    _, loss = model(x, y, **kw)
                sums[i, 0] += loss.float() * n
            sums[i, 1] += n
    if torch.distributed.is_initialized():
        torch.distributed.all_reduce(sums)
    mean = sums[:, 0] / sums[:, 1]
    model.train()
    return {'train': mean[0].item(), 'val': mean[1].item()}


def log_jsonl(path, record, wandb=None):
    with open(path, 'a') as f:
        f.write(json.dumps(record) + '\n')
    if wandb is not None:   # the same record, at its iteration
        wandb.log({k: v for k, v in record.items() if k != 'kind'}, step=record['iter'])


def import_wandb():
    """wandb, imported only for wandb_log=True: it is not a requirement."""
    try:
        import wandb
    except ImportError:
        raise ConfigError("wandb_log=True needs the wandb package, which is not installed: pip install wandb, or "
                          "leave wandb_log off (log.jsonl in out_dir holds every record; python -m tools.report plots it)")
    return wandb


# ----------------------------------------------------------------------------- the data's details
def draw_batch(split, it, micro, cfg, streams, mask, rank=0, world=1):
    """(x, y, holes) on the CPU for micro-step `micro` of iteration `it` on this rank. The iteration's
    batch_size * gradient_accumulation_steps sequences are drawn as one, from one generator of
    (seed, split, it), and each rank's micro-step takes its rows: the batches are a function of the
    iteration alone, whatever the world size or micro-batch split (one process, one micro-step
    draws as it always did). Eval sets use negative iterations, one whole batch_size batch each,
    plain LM windows (a causal=False run's: every window holed); training batches may mix in
    synthetic sequences (p_synth, FON's pretraining) and get holes (p_fill, FON's hole fine-tuning)."""
    T = cfg['block_size']
    training = split == 'train' and it >= 0
    n, accum = split_batch(cfg, world) if training else (cfg['batch_size'], 1)
    S = n * accum * (world if training else 1)
    rows = slice((rank * accum + micro) * n, (rank * accum + micro + 1) * n) if training else slice(0, S)
    g = batch_generator(cfg, 0, split, it, 0)
    marks = full_marks = None
    if cfg['sampler'] == 'blocks' and training:
        xy = blocks(streams[split], range(it * S + rows.start, it * S + rows.stop), T, cfg['seed'])
    else:
        starts = streams.get(f'{split}_starts')    # loss_on='answers': a window starts with an example
        ix = (torch.randint(len(streams[split][0]) - T - 1, (S,), generator=g).tolist() if starts is None else
              starts[torch.randint(len(starts), (S,), generator=g).numpy()].tolist())
        xy, marks = windows(streams[split], ix[rows], T)
        if cfg['p_fill'] > 0 and streams[split][1] is not None:
            full_marks = windows(streams[split], ix, T)[1]
    if cfg['p_synth'] > 0 and training:
        use = torch.rand(S, generator=g) < cfg['p_synth']
        if use.any():
            six = torch.randint(len(streams['synth_train'][0]) - T - 1, (int(use.sum()),), generator=g).tolist()
            at = (torch.cumsum(use, 0) - 1).tolist()    # row -> its draw among the synthetic rows
            mine = use[rows]
            if mine.any():
                rows_here = [r for r in range(rows.start, rows.stop) if use[r]]
                xy[mine], synth_marks = windows(streams['synth_train'], [six[at[r]] for r in rows_here], T)
                if synth_marks is not None:
                    marks = torch.zeros_like(xy, dtype=torch.bool) if marks is None else marks
                    marks[mine] = synth_marks
            if cfg['p_fill'] > 0 and streams['synth_train'][1] is not None:
                synth_all = windows(streams['synth_train'], six, T)[1]
                full_marks = torch.zeros(S, T + 1, dtype=torch.bool) if full_marks is None else full_marks
                full_marks[use] = synth_all
    x, y = xy[:, :-1].clone(), xy[:, 1:].clone()
    if cfg['loss_on'] == 'answers':     # the depth task: no signal from the text around the answer
        y = y.masked_fill(~marks[:, 1:], -1)
    holes = None
    if cfg['p_fill'] > 0 and (training or not cfg['causal']):    # a causal=False run is scored at holes
        # drawn for all S rows, so a row's holes do not depend on which rank reads it
        blank = torch.zeros(S, T, dtype=torch.long)
        holes = make_holes(blank, blank, 0, g, cfg['p_fill'] if training else 1.0, cfg['hole_stride'],
                           cfg['p_hole'], None if full_marks is None else full_marks[:, :-1])[2][rows]
        y = torch.where(holes, x, y)
        x = x.masked_fill(holes, mask)
    return x, y, holes


def split_batch(cfg, world):
    """(micro-batch, micro-steps) per process so that an iteration holds batch_size *
    gradient_accumulation_steps sequences over `world` processes: the largest micro-batch up to
    batch_size that divides a process's share. None when the sequences do not divide by world."""
    seqs = cfg['batch_size'] * cfg['gradient_accumulation_steps']
    if seqs % world:
        return None
    share = seqs // world
    batch = max(b for b in range(1, min(cfg['batch_size'], share) + 1) if share % b == 0)
    return batch, share // batch


def split_hint(cfg, world, given, ckpt=None):
    """What runs instead: a new run's command with the next gradient_accumulation_steps or a
    batch_size that divides; a resumed run keeps its batch, so the world sizes that continue it."""
    B, A = cfg['batch_size'], cfg['gradient_accumulation_steps']
    said = f"batch_size * gradient_accumulation_steps = {B} * {A} sequences per iteration do not split over {world} processes"
    if ckpt is not None:
        sizes = [w for w in range(1, B * A + 1) if B * A % w == 0]
        return (f"{said}, and a resumed run keeps its batch: {os.path.join(cfg['out_dir'], 'ckpt.pt')} continues at "
                f"{' or '.join(map(str, sizes))} processes, as it ran: "
                f"{run_folder.resume_command(cfg, given.argv, len(ckpt['rng']))}")
    A2 = A * world // math.gcd(B * A, world)
    step = world // math.gcd(A, world)
    B2 = (B // step) * step or step
    return (f"{said}: pass --gradient_accumulation_steps={A2} ({B * A2} sequences), "
            f"{run_folder.command(given.argv, {'gradient_accumulation_steps': A2})}, or --batch_size={B2} "
            f"({B2 * A} sequences), {run_folder.command(given.argv, {'batch_size': B2})}")


def data_streams(cfg):
    """The .bin files a run reads: train and val, and the synthetic battery's train stream that
    p_synth mixes into training."""
    streams = {s: os.path.join(cfg['data_dir'], cfg['dataset'], f'{s}.bin') for s in ('train', 'val')}
    if cfg['p_synth'] > 0:
        streams['synth_train'] = os.path.join(cfg['data_dir'], cfg['synth_dataset'], 'train.bin')
    return streams


def open_streams(paths):
    """name -> (token memmap, answer-mark memmap or None), each opened once: a run keeps the files
    it opened for its life, so a dataset prepared anew under it (written beside and swapped in)
    never changes what it reads. Also returns each stream's record: bytes and the sha256 of its
    first MiB, what a checkpoint keeps to tell its data from other data cheaply."""
    streams, record = {}, {}
    for name, path in paths.items():
        with open(path, 'rb') as f:
            record[name] = stream_record(f)
            size = record[name]['bytes']
            data = np.memmap(f, dtype=np.uint16, mode='r') if size and size % 2 == 0 else None   # check_tokens says why
        marks = path[:-4] + '_answers.bin'
        streams[name] = (data, np.memmap(marks, dtype=np.uint8, mode='r') if os.path.isfile(marks) else None)
    return streams, record


def check_same_tokenizer(cfg, meta, argv):
    """p_synth mixes synth_dataset's ids into the dataset's: both must come from one tokenizer."""
    if cfg['p_synth'] <= 0 or cfg['synth_dataset'] == cfg['dataset']:
        return
    synth = read_meta({**cfg, 'dataset': cfg['synth_dataset']})
    if synth is None:
        return      # load_data names the missing stream
    keys = ('tokenizer', 'bpe_vocab', 'itos')
    differ = [k for k in keys if synth.get(k) != meta.get(k)]
    if differ:
        said = lambda m: f"{m.get('tokenizer')} tokenizer, vocab_size {m.get('vocab_size')}"
        raise ConfigError(f"p_synth mixes {cfg['synth_dataset']}'s ids into {cfg['dataset']}'s, but they come from "
                          f"other tokenizers ({cfg['synth_dataset']}: {said(synth)}; {cfg['dataset']}: {said(meta)}; "
                          f"{', '.join(differ)} differ), so its ids would mean other tokens: name a synth_dataset prepared "
                          f"with {cfg['dataset']}'s tokenizer, or mix none in: {run_folder.command(argv, {'p_synth': 0.0})}")


def load_data(cfg, then=None, rank=0, world=1, dev='cpu', ddp=False, argv=()):
    """The data get_batch reads on this process (rank of world, batches sent to dev), once every
    stream is checked; then: the record of the data a resumed checkpoint trained on, which the data
    found now must match; argv: the command's, which a hint repeats. The synthetic battery is made
    on the spot, so python train.py works offline."""
    ds_dir = os.path.join(cfg['data_dir'], cfg['dataset'])
    if cfg['dataset'] == 'synthetic' and not os.path.isfile(os.path.join(ds_dir, 'meta.json')):
        err = None
        if rank == 0:
            try:
                prepare('synthetic', out_dir=cfg['data_dir'])
            except OSError as e:
                err = f"cannot write the synthetic data under data_dir {cfg['data_dir']}: {e.strerror or e}"
        agree(err, ddp)
    meta = read_meta(cfg)
    if meta is None:
        raise ConfigError(no_data(cfg))
    check_same_tokenizer(cfg, meta, argv)
    paths = data_streams(cfg)
    for name, path in paths.items():
        if not os.path.isfile(path):
            need = cfg['synth_dataset'] if name.startswith('synth') else cfg['dataset']
            raise ConfigError(f"{path} not found: prepare the data first ({prepare_hint(need)})"
                              if name != 'synth_train' else f"{path} not found: p_synth needs {prepare_hint(need)}")
    streams, record = open_streams(paths)
    record = data_record(cfg, meta, record)
    check_data(then, record, ds_dir, f"resume on the data it trained on, or start a new run from its weights on "
                                     f"this data: {run_folder.new_run_command(cfg, DEFAULTS) if then else ''}")
    cfg['vocab_size'], mask = dataset_vocab(cfg, meta)
    for name, path in paths.items():
        check_tokens(path, cfg['block_size'] + 2, cfg['vocab_size'] if rank == 0 else None,   # one rank reads every id
                     data=streams[name][0])
    if cfg['loss_on'] == 'answers':
        streams.update(answer_windows(streams, paths, meta, cfg['block_size']))
    return Data(cfg, streams, mask, rank, world, dev, model_classes(cfg['model'])[0].knobs, meta, record)


def answer_windows(streams, paths, meta, T):
    """loss_on='answers' scores only the answers of a synthetic set, so its windows start where an
    example does: {'train_starts': positions, 'val_starts': positions} (prepare_data.example_starts)."""
    newline = get_tokenizer(meta)[0]('\n')
    return {f'{s}_starts': example_starts(paths[s], newline, T, data=streams[s][0]) for s in ('train', 'val')}


def batch_generator(cfg, rank, *key):
    """A generator seeded by (seed, rank, split, iteration, micro-step). get_batch draws each
    iteration from (seed, 0, split, it, 0), the key of rank 0's first micro-step when every rank
    drew its own (so one process draws as it did); tools.eval seeds its eval set the same way."""
    return torch.Generator().manual_seed(zlib.crc32(repr((cfg['seed'], rank) + key).encode()))


def windows(stream, ix, T):
    """The windows of T + 1 tokens that start at ix, and their answer marks where a synthetic
    stream has a {split}_answers.bin beside it (the task-given holes of FON's fine-tuning), else None."""
    data, mark = stream
    xy = torch.from_numpy(np.stack([data[i:i + T + 1].astype(np.int64) for i in ix]))
    if mark is None:
        return xy, None
    return xy, torch.from_numpy(np.stack([mark[i:i + T + 1] for i in ix])).bool()


def blocks(stream, draws, T, seed):
    """The workspace paper's sampler: non-overlapping blocks of T + 1 tokens, one shuffle per pass,
    no replacement; draws: the global draw indices (iteration * sequences per iteration + sequence)."""
    data = stream[0]
    nblocks = len(data) // (T + 1)
    out = []
    for d in draws:
        epoch, j = divmod(d, nblocks)
        b = block_order(seed, epoch, nblocks)[j].item()
        out.append(torch.from_numpy(data[b * (T + 1):(b + 1) * (T + 1)].astype(np.int64)))
    return torch.stack(out)


@functools.lru_cache(maxsize=2)
def block_order(seed, epoch, nblocks):
    return torch.randperm(nblocks, generator=torch.Generator().manual_seed(zlib.crc32(repr((seed, 'blocks', epoch)).encode())))


# ----------------------------------------------------------------------------- the machine
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


def print_sizes(cfg, given):
    """Parameters, FLOPs and the peak training memory of a config on one GPU, built and run on the
    meta device: no data, no memory."""
    try:
        cfg['vocab_size'] = dataset_vocab(cfg, read_meta(cfg))[0]
        with torch.device('meta'):
            m = build_model(cfg['model'], cfg)
        print(f"model: {cfg['model']}")
        print(f"parameters: {m.num_params()}")
        print(f"flops_per_token: {m.flops_per_token(cfg['block_size']):.0f}")
        world = int(os.environ.get('WORLD_SIZE', 1))
        split = split_batch(cfg, world)
        if split is None:
            raise ConfigError(split_hint(cfg, world, given))
        micro_batch, accum = split
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
              f"micro-batch {micro_batch} x {cfg['block_size']} tokens, {accum} micro-step(s), world {world}):")
        print(f"  weights: {gb(mem['weights'])} (fp32)")
        print(f"  gradients: {gb(mem['gradients'])} (fp32; {gb(mem['grads_at_peak'])} of them held at the peak)")
        print(f"  optimizer states: {gb(mem['optimizer'])} ({opt})")
        print(f"  activations: {gb(mem['activations'])} (held at the peak, in the {mem['phase']}; "
              f"{gb(mem['saved'])} kept by the forward for backward)")
        print(f"  total: {gb(mem['total'])} (weights + optimizer states + activations + gradients held at the peak)")
        print(f"  under torchrun: + {gb(mem['gradients'])} for DDP's gradient buckets (a copy of the gradients), "
              f"{gb(mem['total'] + mem['gradients'])} per GPU")
        print("  with torch.compile: not estimated: inductor decides when compiling which activations to keep "
              "and which to recompute in backward, and fuses elementwise ops, so its peak is usually below eager's")
        fits = ['yes' if mem['total'] <= 0.9 * cap * 2 ** 30 else 'no' for cap in (40, 80)]
        print(f"fits on a 40 GB / 80 GB GPU: {fits[0]} / {fits[1]} (keeping 10% for the CUDA context and the allocator)")

    except ConfigError as e:
        fail(e)

if __name__ == '__main__':
    main(sys.argv[1:])
