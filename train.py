"""
The one trainer, for every model in the repo. Read top to bottom, a training step comes first:
the defaults (the generic keys, then each paper's recipe), get_batch (data.py draws the batches),
the optimizers and their schedule, then the loop in train(); below it come the phases train()
calls (setup, build, logging). It talks to a model only through models.py and the forward
model(x, y, **kw) -> (logits, loss).

    python train.py config/quickstart.py                # the README's first run: minutes on a CPU, offline
    python train.py                                     # the defaults: a small GPT on the synthetic battery
    python train.py config/parcae_140m.py --batch_size=16
    torchrun --standalone --nproc_per_node=8 train.py config/parcae_140m.py
    python train.py config/parcae_140m.py --dry_run=True  # parameters, FLOPs, will it fit on a GPU?

A config file is plain Python assignments to the keys below or to fields of the chosen model's
config dataclass. One iteration sees batch_size * gradient_accumulation_steps sequences of
block_size tokens on any number of processes: torchrun shares them out (gradient_accumulation_steps
/ world_size micro-steps each, as in nanoGPT, or smaller micro-batches where that does not divide);
micro_batch_size caps the sequences a process runs at once (more micro-steps, the same iteration).

A new run never replaces a trained one: into an out_dir that holds ckpt.pt it needs
--init_from=resume (continue), another --out_dir, or --overwrite=True. --eval_only=True writes nothing.
A mistake is one line, `error: ...` (exit 2); under torchrun it is printed above torchrun's own
ChildFailedError report, which repeats the exit code only. Ctrl-C, SIGTERM (a scheduler ending a
job) and SIGHUP stop with one line that names the iteration and the command that continues (exit
130, 143, 129).
"""
import datetime
import gc
import json
import math
import os
import sys
import time
import types
import zlib

import torch

import run_folder
from configurator import ConfigError, check, check_settings, defaults_of, fail, parse_args
from data import check_dataset, dataset_vocab, draw_batch, get_batch, load_data, read_meta, split_batch
from models import (FSDP_UNITS, OPTIMIZERS, build_model, check_device, cpu_threads, model_classes, model_fields,
                    peak_flops, print_sizes, resolve_device, seeded_draws, spec_peak_flops, use_tf32)

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
init_from = 'scratch'        # 'scratch' | 'resume' (from out_dir) | a directory whose ckpt.pt gives the weights |
                             # a Parcae authors' release, hf:OWNER/NAME or its folder (docs/parcae.md#fine-tuning)
overwrite = False            # a new run (init_from not 'resume') may replace out_dir's ckpt.pt and log.jsonl
dry_run = False              # build on the meta device, print parameters, flops_per_token and peak memory, exit
seed = 1337
# data
data_dir = 'data'
dataset = 'synthetic'
batch_size = 16
block_size = 128
gradient_accumulation_steps = 1
micro_batch_size = None      # sequences per forward/backward (None: batch_size): memory only, the iteration is the same
# model: any field of the model's config dataclass may be set too; these shape defaults apply
# to every model that has such a field
model = 'gpt'
vocab_size = None            # None: from the data's meta.json
n_layer = 4
n_head = 4
n_embd = 128
dropout = 0.0
grad_checkpoint = False      # recompute each block's activations in backward (torch.utils.checkpoint): memory for FLOPs
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
dist_timeout_s = 1800        # torchrun: how long a collective waits for a rank before the run fails
parallel = 'ddp'             # torchrun: 'ddp' (each process holds the whole model) | 'fsdp' (parameters, gradients
                             # and optimizer states sharded over the processes); one process runs unsharded either way
sharded_checkpoint = False   # parallel='fsdp' under torchrun: each process writes its shards of the checkpoint
                             # (torch.distributed.checkpoint), not rank 0 the whole; it resumes at any world size
tf32 = None                  # CUDA TF32 matmuls; None: on unless dtype is 'float32' (then true FP32)
# FON recipe (Sections 3-4): synthetic sequences mixed into pretraining, then hole fine-tuning
p_synth = 0.0                # probability that a sequence comes from synth_dataset (same tokenizer)
synth_dataset = 'synthetic'
p_fill = 0.0                 # hole fine-tuning: probability that a sequence gets holes
hole_stride = 8              # holes fall on positions p with p % hole_stride == 0 ...
p_hole = 0.15                # ... each with this probability
mask_id = None               # None: meta.json's mask_id, else the first id after the data's vocabulary
# Parcae recipe (Section Q, Table 21)
muon_variant = 'torch'       # 'torch': torch.optim.Muon | 'parcae': Section Q.2's Muon (ParcaeMuon)
muon_wd_decay = False        # Muon weight decay falls linearly to 0 over max_iters
muon_momentum_warmup = 0     # Muon momentum rises from muon_momentum_start over these iterations (Parcae's code: 300)
update_clipping = False      # AdamW step / max(1, RMS(g / sqrt(v_hat))) per tensor (the RDM recipe, Q.1)
adam_atan2 = False           # AdamW update atan2(m_hat, sqrt(v_hat)): no epsilon (the RDM recipe, Q.1)
# the workspace paper's sampler
sampler = 'random'           # 'random' windows | 'blocks': non-overlapping blocks of block_size+1, without replacement
# experiments: keys of one experiment each (README's depth task, a battery control, one config)
loss_on = 'all'              # 'all' tokens | 'answers': only the answer spans of a synthetic set ({split}_answers.bin)
causal = True                # False (GPT only, needs p_fill > 0): full attention, the loss at the holes only (a
                             # BERT-style masked-reconstruction encoder); its eval sets are holed and scored there
muon_momentum_start = 0.85   # where muon_momentum_warmup starts
DEFAULTS = defaults_of(globals())

# ----------------------------------------------------------------------------- get_batch (data.py)
# get_batch('train', it, micro, data) -> (x, y, kw) on the device: a micro-step's inputs, targets and
# the forward's keywords (FON's holes; a causal=False run's full attention), drawn by data.draw_batch
# as a function of the iteration alone; load_data opens and checks the streams it reads.


def train_batch(it, micro, data, env, seeded):
    """get_batch's training micro-step, with the seeds of its sequences where the model draws from
    them (seeded: models.seeded_draws): seed i is a function of (seed, it, the sequence's index in the
    iteration), so a model's draws are the same at any world size and micro-batch split."""
    x, y, kw = get_batch('train', it, micro, data)
    if seeded:
        first = (env.rank * env.accum + micro) * env.micro_batch    # draw_batch's rows
        kw = {**kw, 'seeds': torch.tensor([zlib.crc32(repr((data.cfg['seed'], 'draws', it, i)).encode())
                                           for i in range(first, first + len(x))])}
    return x, y, kw


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
        opts = [OPTIMIZERS['stable_adamw'](adamw, lr=cfg['learning_rate'], betas=betas, eps=cfg['eps'],
                                           update_clipping=cfg['update_clipping'], atan2=cfg['adam_atan2'])]
    else:
        opts = [OPTIMIZERS['adamw'](adamw, lr=cfg['learning_rate'], betas=betas, eps=cfg['eps'], fused=device_type == 'cuda')]
    if muon:
        kw = dict(lr=cfg['muon_lr'] or cfg['learning_rate'], momentum=cfg['muon_momentum_start']
                  if cfg['muon_momentum_warmup'] > 0 else cfg['muon_momentum'], weight_decay=cfg['muon_weight_decay'])
        opts.append(OPTIMIZERS['parcae_muon' if cfg['muon_variant'] == 'parcae' else 'muon'](muon, **kw))
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
        return dry(cfg, given)
    env, ckpt = setup(cfg, given, run)
    data, raw_model, opts, scaler, iter_num, best_val = build(cfg, env, ckpt, run)
    del ckpt    # its tensors
    model = wrap(raw_model, env)   # compiled, and under torchrun in DDP (FSDP sharded it in build)
    log = Log(cfg, env, data, raw_model, wandb)

    model.train()
    first_iter = iter_num
    seeded = seeded_draws(raw_model) is not None
    batch = train_batch(iter_num, 0, data, env, seeded) if iter_num < cfg['max_iters'] else None
    while True:
        run.iter = iter_num
        lr = set_schedule(opts, iter_num, cfg)
        # a resumed run evaluates where it starts, as its log was trimmed there
        if iter_num % cfg['eval_interval'] == 0 or iter_num in (cfg['max_iters'], first_iter) or cfg['eval_only']:
            losses = estimate_loss(model.module if env.ddp and not env.fsdp else model, data, env.autocast, env.fsdp)
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
            if env.fsdp:  # sync gradients only on the last micro-step
                raw_model.set_requires_gradient_sync(micro == env.accum - 1)
            elif env.ddp:
                model.require_backward_grad_sync = micro == env.accum - 1
            with env.autocast:
                loss = model(x, y, **kw)[1] / env.accum   # the logits are not kept: at 32k vocab they are GBs
            # the next micro-step's batch (after the last, the next iteration's first) is read and sent
            # while the device runs this step, as nanoGPT does; a batch depends only on where it falls
            it, m = (iter_num, micro + 1) if micro + 1 < env.accum else (iter_num + 1, 0)
            batch = train_batch(it, m, data, env, seeded) if it < cfg['max_iters'] else None
            scaler.scale(loss).backward()
        norm = None
        if cfg['grad_clip'] > 0:
            for opt in opts:
                scaler.unscale_(opt)
            norm = torch.nn.utils.clip_grad_norm_(raw_model.parameters(), cfg['grad_clip'])
            if env.fsdp:    # a DTensor, replicated: the norm over every shard
                norm = norm.full_tensor()
        for opt in opts:
            scaler.step(opt)
        scaler.update()
        for opt in opts:
            opt.zero_grad(set_to_none=True)

        if iter_num % cfg['log_interval'] == 0:
            stats = train_stats(raw_model, env)
            if env.master:
                lossf = loss.item() * env.accum
                if not math.isfinite(lossf):
                    run_folder.diverged(f"training loss is {lossf} at iter {iter_num}", run)
                log.train(iter_num, lossf, lr, norm, stats)
        iter_num += 1
    if env.master and not cfg['eval_only']:
        print(f"done: {os.path.join(cfg['out_dir'], 'ckpt.pt')} holds iter {run.last_good} (best val loss {best_val:.4f}); "
              f"next: python sample.py --out_dir={cfg['out_dir']}  or  python -m tools.eval --out_dir={cfg['out_dir']}")


def main(argv):
    """python train.py ARGS: one run, stopped by Ctrl-C or a signal with one line (run_folder.guard)."""
    run = run_folder.Run()
    run_folder.guard(run, lambda: train(argv, run))
    if torch.distributed.is_initialized():
        # the group goes last, after the run's objects that hold it (DDP's reducer, FSDP's sharded
        # parameters and their collectives) are freed, then the ranks leave together: a gloo rank that
        # tore the group down first hung its peer now and then, and one whose FSDP state outlived the
        # group aborted at exit ("terminate called without an active exception")
        gc.collect()
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


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
    name = name or run_folder.release_model(given.get('init_from')) or defaults['model']
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
        check_parallel(cfg, given)     # with a resumed run's settings
        if split_batch(cfg, world) is None:
            raise ConfigError(split_hint(cfg, world, given, ckpt))
    except ConfigError as e:
        fail(e)
    if ddp:
        torch.distributed.init_process_group(backend='nccl' if dev.startswith('cuda') else 'gloo',
                                             timeout=datetime.timedelta(seconds=cfg['dist_timeout_s']))
        if dev.startswith('cuda'):
            torch.cuda.set_device(dev)
    micro_batch, accum = split_batch(cfg, world)
    device_type = 'cuda' if dev.startswith('cuda') else ('mps' if dev.startswith('mps') else 'cpu')
    torch.manual_seed(cfg['seed'] + rank)
    threads = cpu_threads() if device_type == 'cpu' else None
    tf32 = device_type == 'cuda' and use_tf32(cfg, ptdtype)
    if device_type == 'cuda':
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    env = types.SimpleNamespace(ddp=ddp, fsdp=ddp and cfg['parallel'] == 'fsdp', rank=rank, local_rank=local_rank,
                                world=world, master=rank == 0, dev=dev,
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
        data = load_data(cfg, model_classes(cfg['model'])[0].knobs, env.rank, env.world, env.dev, env.ddp,
                         then=ckpt and ckpt.get('data'), hint=ckpt and run_folder.new_run_command(cfg, DEFAULTS),
                         argv=run.given.argv)
        raw_model = build_model(cfg['model'], cfg)
        run_folder.load_start(raw_model, cfg, ckpt)
        if env.fsdp:
            shard(raw_model, cfg, env)
        else:
            raw_model.to(env.dev)
        opts = configure_optimizers(raw_model, cfg, env.device_type)
        scaler = torch.amp.GradScaler(env.device_type, enabled=env.ptdtype == torch.float16)
        if ckpt is not None:
            run_folder.restore_states(opts, scaler, ckpt, os.path.join(cfg['out_dir'], 'ckpt.pt'), raw_model)
            if not cfg['eval_only']:
                xy = draw_batch('train', ckpt['iter_num'], 0, cfg, data.streams, data.mask)[:2]
                then = split_batch(cfg, len(ckpt['rng']))
                run_folder.check_world(cfg, run.given, ckpt, raw_model, xy, env.world, (then and then[0], env.micro_batch))
    except ConfigError as e:
        err = str(e)
    try:
        run_folder.agree(err, env.ddp)
        if env.master and not cfg['eval_only']:   # a new run starts its own log; a resumed one trims its log to the checkpoint
            try:
                run_folder.claim_run_folder(run, ckpt)
            except ConfigError as e:
                err = str(e)
        run_folder.agree(err, env.ddp)
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


def shard(model, cfg, env):
    """parallel='fsdp' under torchrun: fully_shard each block of models.FSDP_UNITS, then the root (the
    rest), before the optimizers are built from the sharded parameters. Each unit moves to the device
    as it is sharded, so no process holds the whole model there. Autocast casts as it does under DDP:
    the shards, their all-gathers and the gradients' reduce-scatters stay float32."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    scalars = [n for n, p in model.named_parameters() if p.dim() == 0]
    if scalars:
        raise ConfigError(f"parallel='fsdp' cannot shard the {cfg['model']} model's scalar parameter {scalars[0]} "
                          f"(fully_shard takes tensors of one dimension or more): use parallel='ddp'")
    with torch.no_grad():   # rank 0's initial weights, as DDP broadcasts them (each rank seeds its own generator)
        for t in [*model.parameters(), *model.buffers()]:
            on_dev = t.to(env.dev)
            torch.distributed.broadcast(on_dev, 0)
            t.copy_(on_dev)
    mesh = init_device_mesh(env.device_type, (env.world,))
    for block in FSDP_UNITS[cfg['model']](model):
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    if getattr(model, 'ddp_find_unused_parameters', False):
        # a part that sits out a step on some ranks only reduces zeros there, so that every rank's
        # reduce-scatter holds the same parameters
        model.set_reduce_scatter_unused_params(True)


def check_parallel(cfg, given):
    """parallel='fsdp' refuses Muon (whole matrices) and float16 (a gradient scaler) in one line; a
    sharded_checkpoint given for anything else, too (a resumed one runs on, saving ckpt.pt whole)."""
    if cfg['sharded_checkpoint'] and 'sharded_checkpoint' in given and (cfg['parallel'] != 'fsdp' or
                                                                       'WORLD_SIZE' not in os.environ):
        raise ConfigError(f"sharded_checkpoint=True writes the shards of parallel='fsdp' processes under torchrun, and "
                          f"this run is parallel={cfg['parallel']!r} on "
                          f"{'torchrun' if 'WORLD_SIZE' in os.environ else 'one process (python)'}: leave it off")
    if cfg['parallel'] != 'fsdp':
        return
    if cfg['optimizer'] == 'muon':
        raise ConfigError("parallel='fsdp' shards each matrix over the processes, and Muon orthogonalizes whole "
                          "matrices: use optimizer='adamw' with it, or parallel='ddp'")
    if cfg['dtype'] == 'float16':
        raise ConfigError("parallel='fsdp' takes dtype 'auto', 'bfloat16' or 'float32', not 'float16' (this trainer "
                          "has no gradient scaler for sharded gradients): use bfloat16, or parallel='ddp'")


def wrap(raw_model, env):
    """The model the loop runs: compiled (compile), and under torchrun wrapped in DDP (an FSDP model
    was sharded in build)."""
    model = torch.compile(raw_model) if env.compile else raw_model
    if env.ddp and not env.fsdp:
        # a model whose parts sit out some steps (FON's revision organ without holes) says so
        unused = getattr(raw_model, 'ddp_find_unused_parameters', False)
        # gradients as views of the buckets: no second copy of the gradients
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[env.local_rank] if env.device_type == 'cuda'
                                                          else None, find_unused_parameters=unused, gradient_as_bucket_view=True)
    return model


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
                  f"dtype {str(env.ptdtype)[6:]}, tf32 {env.tf32}, compile {env.compile}, world {env.world}"
                  f"{' (FSDP)' if env.fsdp else ''}")
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

    def train(self, iter_num, lossf, lr, norm, stats):
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
        rec.update(stats)
        extra = ''.join(f", {k} {v:.4g}" for k, v in rec.items() if k not in ('kind', 'iter', 'loss', 'lr', 'ms', 'tokens_per_s', 'mfu'))
        print(f"iter {iter_num}: loss {lossf:.4f}, lr {lr:.2e}, {dt * 1000:.1f}ms, "
              f"{rec['tokens_per_s']:.0f} tok/s, mfu {100 * rec['mfu']:.2f}%{extra}")
        log_jsonl(self.path, rec, self.wandb)


@torch.no_grad()
def estimate_loss(model, data, autocast, lockstep=False):
    """Mean train and val loss over the eval_iters fixed batches of batch_size sequences (the same
    set at any world size: under torchrun each rank scores every world-th batch, and the sums are
    reduced, so every rank takes the same checkpoint/NaN decision). A causal=False run's is the
    mean over all the holes of its holed eval batches, a loss_on='answers' run's the mean over all
    their answer tokens. model: the model without its DDP wrapper (the ranks score different batches).
    lockstep (FSDP: a forward all-gathers): every rank runs as many forwards, a rank short of a
    batch or of scored tokens one that counts nothing."""
    cfg = data.cfg
    model.eval()
    sums = torch.zeros(2, 2, device=data.dev)     # (train, val) x (loss sum, weight); on dev: nccl reduces only CUDA tensors
    rounds = -(-cfg['eval_iters'] // data.world) * data.world if lockstep else cfg['eval_iters']
    for i, split in enumerate(('train', 'val')):
        for k in range(data.rank, rounds, data.world):
            x, y, kw = get_batch(split, -1 - min(k, cfg['eval_iters'] - 1), 0, data)
            n = int((y != -1).sum()) if cfg['loss_on'] == 'answers' or not cfg['causal'] else 1
            n = n if k < cfg['eval_iters'] else 0
            if n or lockstep:
                with autocast:
                    _, loss = model(x, y, **kw)
            if n:
                sums[i, 0] += loss.float() * n
            sums[i, 1] += n
    if torch.distributed.is_initialized():
        torch.distributed.all_reduce(sums)
    mean = sums[:, 0] / sums[:, 1]
    model.train()
    return {'train': mean[0].item(), 'val': mean[1].item()}


def train_stats(model, env):
    """The model's own records of a training log line (its train_stats, if any), rank 0's; under FSDP
    every rank reads them from the whole parameters, gathered for it (collective)."""
    if not hasattr(model, 'train_stats') or not (env.master or env.fsdp):
        return {}
    if not env.fsdp:
        return model.train_stats()
    from torch.distributed.fsdp import FSDPModule
    units = [m for m in model.modules() if isinstance(m, FSDPModule)]
    for m in units:
        m.unshard()
    try:
        return model.train_stats()
    finally:
        for m in units:
            m.reshard()


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


def dry(cfg, given):
    """--dry_run=True: the sizes of this config on one GPU (models.print_sizes), with no data."""
    try:
        if run_folder.release_model(cfg['init_from']):   # the release's model and vocabulary, not cfg's defaults
            run_folder.release_config(cfg, given)
        else:
            cfg['vocab_size'] = dataset_vocab(cfg, read_meta(cfg))[0]
        world = int(os.environ.get('WORLD_SIZE', 1))
        if split_batch(cfg, world) is None:
            raise ConfigError(split_hint(cfg, world, given))
        check_parallel(cfg, given)
        print_sizes(cfg, world, split_batch, configure_optimizers)
    except ConfigError as e:
        fail(e)


if __name__ == '__main__':
    main(sys.argv[1:])
