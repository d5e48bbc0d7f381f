"""
The run folder and its checkpoints: what keeps a trained run safe while train.py writes into
out_dir, and the checkpoint files that train.py, sample.py and the tools read.

A new run never replaces a trained one unless told to (--overwrite=True sets the old run aside in
out_dir/replaced/ until the new one has a checkpoint); a resumed run continues the run in its
checkpoint and refuses settings that would change what it trains; one process at a time writes a
folder (out_dir/.lock); checkpoints are written whole or not at all; Ctrl-C, SIGTERM and SIGHUP
stop with one line that names the command that continues.
"""
import dataclasses
import errno
import json
import os
import shlex
import shutil
import signal
import sys
import time

import torch

from configurator import ConfigError, fail
from models import build_model, model_classes, model_fields, seeded_draws
import pretrained


class Run:
    """How far a run got, for what a stop or a crash reports: its cfg, the settings given (given,
    whose argv the commands a hint prints repeat) and the trainer's defaults, the iteration it is
    at (iter), the last checkpoint's iteration (last_good), the folder a replaced run waits in
    (aside) and the stamp of the ckpt.pt that the checks saw."""
    def __init__(self):
        self.cfg = self.given = self.defaults = self.iter = self.last_good = self.aside = self.stamp = self.lock = None


def check_run_folder(run, cfg, given, defaults):
    """Every check of out_dir before anything is written (a refused command changes nothing); a run
    an interrupted --overwrite set aside is put back first. Returns the checkpoint to resume, None
    for a new run. defaults: the trainer's (what a key missing from an older checkpoint meant)."""
    check_out_dir(cfg['out_dir'])
    put_back(cfg)
    run.cfg, run.given, run.defaults, run.stamp = cfg, given, defaults, checkpoint_stamp(cfg)
    ckpt = prepare_out_dir(cfg, given, defaults)
    run.last_good = ckpt['iter_num'] if ckpt else None
    return ckpt


def claim_run_folder(run, ckpt):
    """Once every check passed (rank 0, not eval_only): hold out_dir for this process, set aside the
    run --overwrite replaces, and start config.json and the log (a resumed run's trimmed to its checkpoint)."""
    run.lock = claim_out_dir(run.cfg, run.stamp)
    run.aside = set_aside(run.cfg) if ckpt is None else None
    start_files(run.cfg, os.path.join(run.cfg['out_dir'], 'log.jsonl'), ckpt['iter_num'] if ckpt else None)


def save(run, model, opts, scaler, meta, it, best_val, data):
    """The checkpoint at iteration it (collective under torchrun); the run it replaced goes."""
    try:
        save_run(run.cfg, model, opts, scaler, meta, it, best_val, data)
    except ConfigError as e:
        fail(e)
    run.last_good = it
    if run.aside:   # this run has a checkpoint: the one it replaces goes
        shutil.rmtree(run.aside, ignore_errors=True)
        run.aside = None


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


def guard(run, body):
    """Runs body() with Ctrl-C, SIGTERM and SIGHUP stopping it in one line (interrupted), and a run
    that fails before its first checkpoint putting back the run --overwrite set aside."""
    # a signal the launcher ignores stays ignored (nohup's SIGHUP)
    handlers = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)
                if signal.getsignal(sig) is not signal.SIG_IGN}
    ddp = 'RANK' in os.environ
    try:
        body()
    except KeyboardInterrupt as e:
        interrupted(run, getattr(e, 'signum', signal.SIGINT))
    except BaseException as e:
        if ddp and not isinstance(e, SystemExit):
            # a signal torchrun passed on may have ended a peer while this rank waited in a collective:
            # its handler runs here, in the sleep, and the stop is Ctrl-C's, not the peer's error
            try:
                time.sleep(0.2)
            except KeyboardInterrupt as k:
                interrupted(run, getattr(k, 'signum', signal.SIGINT))
        if run.aside and run.last_good is None:
            give_back(run.cfg, run.aside)
        if ddp and int(os.environ['RANK']) != 0 and peer_gone(e):
            sys.exit(1)     # the rank that stopped first says why
        raise
    finally:
        for sig, h in handlers.items():
            signal.signal(sig, h)


# What a resumed run may set anew: how it runs, not what it trains (its data, batch, model,
# optimizer, schedule and seed are the checkpoint's). The first five are this command's own; the
# rest keep the checkpoint's value unless given.
RUN_KEYS = ('out_dir', 'init_from', 'overwrite', 'eval_only', 'dry_run')
CONTINUE_KEYS = RUN_KEYS + ('max_iters', 'eval_interval', 'log_interval', 'eval_iters', 'always_save_checkpoint',
                            'data_dir', 'device', 'dtype', 'compile', 'tf32', 'parallel', 'wandb_log', 'wandb_project',
                            'wandb_run_name', 'sharded_checkpoint')


def prepare_out_dir(cfg, given, defaults):
    """The checkpoint to resume (None for a new run), after the checks that keep a trained run
    safe: a new run never replaces out_dir's ckpt.pt unless told to, and a resumed run continues
    the run in the checkpoint, so a setting given now that differs from it stops here; a new run
    from a release takes its config (start_from_release). Writes nothing."""
    ckpt_path = os.path.join(cfg['out_dir'], 'ckpt.pt')
    if cfg['init_from'] != 'resume':
        if os.path.exists(ckpt_path) and cfg['eval_only']:
            raise ConfigError(f"--eval_only=True with init_from={cfg['init_from']!r} would evaluate a fresh model, not the "
                              f"trained {ckpt_path}; to evaluate it: {command(given.argv, {'init_from': 'resume'})}")
        if os.path.exists(ckpt_path) and not cfg['overwrite']:
            raise ConfigError(f"{ckpt_path} holds a trained run: continue it with {command(given.argv, {'init_from': 'resume'})}"
                              f", start this run in another --out_dir, or replace it (and its log) with "
                              f"{command(given.argv, {'overwrite': True})}")
        if release_model(cfg['init_from']):
            start_from_release(cfg, given)
        return None
    if not os.path.isfile(ckpt_path):
        raise ConfigError(f"init_from='resume' but there is no checkpoint at {ckpt_path} "
                          f"(a new run: {command(given.argv, drop=('init_from',))})")
    ckpt = read_checkpoint(ckpt_path, shards=False)    # build loads a sharded checkpoint's states
    missing = [k for k in ('optimizers', 'scaler', 'rng', 'best_val_loss') if k not in ckpt]
    if missing:
        run = {**defaults, **ckpt['config'], **ckpt['model_args'], 'model': ckpt['model_name'], 'out_dir': cfg['out_dir']}
        raise ConfigError(f"{ckpt_path} cannot be resumed (it lacks {', '.join(missing)}); "
                          f"start a new run from its weights: {new_run_command(run, defaults)}")
    if 'model' in given and ckpt['model_name'] != cfg['model']:
        raise ConfigError(f"{ckpt_path} holds a '{ckpt['model_name']}' model but this config builds '{cfg['model']}'")
    cfg['model'] = ckpt['model_name']
    differ = changed_settings(cfg, given, ckpt, defaults)
    if differ:
        keep = {k: then for k, then in differ}
        raise ConfigError(f"resume continues the run in {ckpt_path}, and these settings differ from it: " +
                          ', '.join(f"{k}={given[k]!r} (checkpoint: {then!r})" for k, then in differ) +
                          f"; continue it as it was: {command(given.argv, keep)}, or start a new run in another "
                          f"--out_dir (a resumed run may change only {', '.join(CONTINUE_KEYS[5:])})")
    run = {**defaults, **model_fields(cfg['model']), **ckpt['config'], **ckpt['model_args']}
    for k in list(cfg) + list(model_fields(cfg['model'])):
        if k in run and not (k in RUN_KEYS or (k in CONTINUE_KEYS and k in given)):
            cfg[k] = run[k]
    if cfg['max_iters'] < ckpt['iter_num'] and not cfg['eval_only']:
        raise ConfigError(f"{ckpt_path} holds iter {ckpt['iter_num']}, past --max_iters={cfg['max_iters']}: a resumed run "
                          f"only goes forward (give a --max_iters above {ckpt['iter_num']}), or evaluate it: "
                          f"{command(given.argv, {'eval_only': True})}")
    return ckpt


def changed_settings(cfg, given, ckpt, defaults):
    """(key, the checkpoint's value) for each given setting outside CONTINUE_KEYS that differs from
    the checkpoint's run; None stands for a value derived as it was. Model fields are compared
    as the model config holds them (derived fields, an int for a per-layer tuple)."""
    args, run = ckpt['model_args'], {**defaults, **ckpt['config']}
    mine = {k: v for k, v in given.items() if k in args and v is not None}
    try:
        c = model_classes(cfg['model'])[1](**{**args, **mine})
        now = {k: getattr(c, k) for k in mine}
    except (ValueError, TypeError, AssertionError, ZeroDivisionError):
        now = mine
    differ = {k: args[k] for k in mine if now[k] != args[k]}
    differ.update({k: run[k] for k, v in given.items() if k not in args and k not in CONTINUE_KEYS
                   and k in run and v is not None and v != run[k]})
    return list(differ.items())


def checkpoint_stamp(cfg):
    """What says whether out_dir's ckpt.pt changed: (size, mtime), None when there is none."""
    try:
        st = os.stat(os.path.join(cfg['out_dir'], 'ckpt.pt'))
        return st.st_size, st.st_mtime_ns
    except OSError:     # none there, or out_dir is not a folder (claim_out_dir says so)
        return None


def check_out_dir(out):
    """out_dir must be a folder or a name a folder can be made at (not a file, not a dangling link)."""
    if os.path.islink(out) and not os.path.exists(out):
        raise ConfigError(f"out_dir {out} is a symlink to {os.readlink(out)}, which does not exist: create that "
                          f"folder, remove the link, or pick another --out_dir")
    if os.path.exists(out) and not os.path.isdir(out):
        raise ConfigError(f"cannot write to out_dir {out}: it is a file, not a folder; pick another --out_dir")


def lock_out_dir(out):
    """Takes out/.lock (an flock) for this process and returns (the open lock file, None); when
    another process holds it, returns (None, that process's pid as it wrote it)."""
    import fcntl
    try:
        os.makedirs(out, exist_ok=True)
        lock = open(os.path.join(out, '.lock'), 'a+')
    except OSError as e:
        raise ConfigError(f"cannot write to out_dir {out}: {e.strerror or e}" + free_space(os.path.dirname(os.path.abspath(out)), e))
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.seek(0)
        pid = lock.read().strip() or 'unknown'
        lock.close()
        return None, pid
    return lock, None


def claim_out_dir(cfg, stamp):
    """Hold out_dir/.lock for the life of this process, so that one run writes a folder; a run that
    finished meanwhile (its ckpt.pt is not the one checked) stops this one. Returns the lock file."""
    check_out_dir(cfg['out_dir'])
    lock, pid = lock_out_dir(cfg['out_dir'])
    if lock is None:
        raise ConfigError(f"out_dir {cfg['out_dir']} is in use by pid {pid} (another train.py run); "
                          f"wait for it to end or pick another --out_dir")
    try:
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
    except OSError as e:
        raise ConfigError(f"cannot write to out_dir {cfg['out_dir']}: {e.strerror or e}" + free_space(cfg['out_dir'], e))
    if checkpoint_stamp(cfg) != stamp:
        raise ConfigError(f"{os.path.join(cfg['out_dir'], 'ckpt.pt')} changed while this run started (another run "
                          f"wrote it); run the command again")
    return lock


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
    write_whole(path, ''.join(keep))


def write_whole(path, text):
    """path's new content, whole or not at all (a .tmp beside it, then swapped in)."""
    try:
        with open(path + '.tmp', 'w') as f:
            f.write(text)
        os.replace(path + '.tmp', path)
    except BaseException:
        if os.path.exists(path + '.tmp'):
            os.remove(path + '.tmp')
        raise


def start_files(cfg, log_path, resume_iter):
    """config.json, and the log: a new run's empty, a resumed run's trimmed to its checkpoint. A
    full disk is one line; neither file is left half written."""
    try:
        if resume_iter is None:
            write_whole(log_path, '')
        else:
            trim_log(log_path, resume_iter)
        write_whole(os.path.join(cfg['out_dir'], 'config.json'), json.dumps(cfg, indent=1, default=str))
    except OSError as e:
        raise ConfigError(f"cannot write to out_dir {cfg['out_dir']}: {e.strerror or e}" + free_space(cfg['out_dir'], e))


def free_space(path, e):
    """The text that ends a full disk's message, ' (N MiB free)'; '' for any other error."""
    if getattr(e, 'errno', None) != errno.ENOSPC:
        return ''
    try:
        return f" ({shutil.disk_usage(path).free / 2 ** 20:.1f} MiB free)"
    except OSError:
        return ''


def release_model(init_from):
    """The model of a release of the Parcae authors (init_from=hf:OWNER/NAME or its folder), else None."""
    release = isinstance(init_from, str) and init_from not in ('scratch', 'resume') and pretrained.is_release(init_from)
    return 'parcae' if release else None


def dataset_meta(cfg):
    """The dataset's meta.json ({} where there is none: data.check_dataset has checked what is there)."""
    try:
        with open(os.path.join(cfg['data_dir'], cfg['dataset'], 'meta.json'), encoding='utf-8') as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def release_config(cfg, given):
    """init_from=<a release>: its model, and its config for every field the user did not set, into cfg.
    Returns the release as read_checkpoint reads it."""
    src = read_checkpoint(cfg['init_from'])
    if 'model' in given and cfg['model'] != src['model_name']:
        raise ConfigError(f"init_from={cfg['init_from']} holds a '{src['model_name']}' model, not '{cfg['model']}'")
    cfg['model'] = src['model_name']
    for k, v in src['model_args'].items():
        if k not in given:
            cfg[k] = v
    return src


def start_from_release(cfg, given):
    """init_from=<a release>: the run is a parcae of the release's config (release_config), on a dataset
    encoded with the release's tokenizer.json (the sha256 in its meta.json is the release's)."""
    src = release_config(cfg, given)
    want, meta = src['meta']['tokenizer_sha256'], dataset_meta(cfg)
    if want is None:
        raise ConfigError(f"init_from={cfg['init_from']} is a release of the Parcae authors without a tokenizer.json "
                          f"beside its weights: a fine-tune needs data encoded with the tokenizer its weights read")
    if meta.get('tokenizer_sha256') != want:   # their weights read the ids of their tokenizer.json
        kind = meta.get('tokenizer') or 'char'
        has = (f"another tokenizer.json (sha256 {str(meta.get('tokenizer_sha256'))[:8]})" if kind == 'json'
               else f"the {kind} tokenizer")
        folder = os.path.dirname(src['meta']['tokenizer_file'])
        raise ConfigError(f"init_from={cfg['init_from']} is a release of the Parcae authors, whose weights read the ids "
                          f"of its tokenizer.json (sha256 {want[:8]}), and {os.path.join(cfg['data_dir'], cfg['dataset'])} "
                          f"is encoded with {has}: prepare a text with its tokenizer, python prepare_data.py NAME "
                          f"--input FILE {shlex.quote('--tokenizer=json:' + folder)}, and fine-tune on the folder it "
                          f"writes (--dataset=NAME_json_{want[:8]})")


def load_start(model, cfg, ckpt):
    """The weights a run starts from: the checkpoint's on resume, another run's or a release's with
    init_from=DIR (of the same model; start_from_release took a release's config), else the fresh ones
    model was built with."""
    if ckpt is not None:
        if 'model' not in ckpt:     # sharded: an FSDP run loads its shards once sharded (restore_states)
            if cfg['parallel'] == 'fsdp' and torch.distributed.is_initialized():
                return
            ckpt.update(read_shards(cfg['out_dir'], ckpt))
        load_weights(model, ckpt['model'], os.path.join(cfg['out_dir'], 'ckpt.pt'))
    elif cfg['init_from'] != 'scratch':
        src = read_checkpoint(cfg['init_from'])
        if src['model_name'] != cfg['model']:
            raise ConfigError(f"init_from={cfg['init_from']} holds a '{src['model_name']}' model, not '{cfg['model']}'")
        load_weights(model, src['model'], cfg['init_from'])


def restore_states(opts, scaler, ckpt, path, model=None):
    """The optimizers' and the fp16 scaler's states from a checkpoint. A run saved without fp16
    (an empty scaler state) resumed with --dtype=float16 starts a fresh scaler, as a new fp16 run does.
    The optimizers of an FSDP model (model: the one they step) take their shards of the whole states,
    or of a sharded checkpoint's."""
    try:
        if 'model' not in ckpt:
            load_shards(model, opts, ckpt, os.path.dirname(path))
        for opt, state in zip(opts, ckpt['optimizers']):
            if state is None:   # in the shards
                continue
            if fsdp_model(model) and state['state']:
                from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict
                set_optimizer_state_dict(model, opt, by_name(state, model, opt),
                                         options=StateDictOptions(full_state_dict=True))
                for group, saved in zip(opt.param_groups, state['param_groups']):   # it reads tuples back as lists
                    group.update({k: v for k, v in saved.items() if k != 'params'})
            else:
                opt.load_state_dict(state)
    except (ValueError, KeyError, RuntimeError, IndexError, dcp_error()) as e:
        raise ConfigError(f"the optimizer state in {path} does not fit this run's optimizers: {str(e).splitlines()[0][:200]}")
    if ckpt['scaler']:
        scaler.load_state_dict(ckpt['scaler'])


def draws_randomness(model, x, y, kw=None):
    """Whether a training forward of model draws from torch's global generators (dropout; a model's
    sampled depths or steps where it is given no seeds); the generators are left as they were."""
    dev = next(model.parameters()).device
    cuda = dev.type == 'cuda'
    before = (torch.get_rng_state(), torch.cuda.get_rng_state(dev) if cuda else None)
    model.train()
    with torch.no_grad():
        model(x.to(dev), y.to(dev), **(kw or {}))
    after = (torch.get_rng_state(), torch.cuda.get_rng_state(dev) if cuda else None)
    torch.set_rng_state(before[0])
    if cuda:
        torch.cuda.set_rng_state(before[1], dev)
    return not torch.equal(before[0], after[0]) or (cuda and not torch.equal(before[1], after[1]))


def check_world(cfg, given, ckpt, model, xy, world, micro_batches=(None, None)):
    """A resume at another world size sees the same batches (a function of the iteration alone), and
    a model's seeded draws (Parcae's depths and h_0, TextNCA's steps: models.seeded_draws) follow
    each sequence's seed. What it cannot keep: draws from each process's own generator (dropout),
    and one draw per micro-batch where the micro-batch size (then, now) changes. Such a run resumes
    at its own world size."""
    then = len(ckpt['rng'])
    if then == world:
        return
    seeded = seeded_draws(model)
    kw = {'seeds': torch.zeros(1, dtype=torch.long)} if seeded else {}
    if draws_randomness(model, xy[0][:1], xy[1][:1], kw):
        why = "draws random numbers in training (dropout) from each process's generator, so they would change"
    elif seeded == 'batch' and micro_batches[0] != micro_batches[1]:
        why = (f"draws one depth or step count per micro-batch, and the micro-batch would be {micro_batches[1]} "
               f"sequences, not {micro_batches[0]}, so they would change")
    else:
        return
    raise ConfigError(f"{os.path.join(cfg['out_dir'], 'ckpt.pt')} was trained by {then} process(es) and this resume runs "
                      f"{world}: the batches would be the same, but this {cfg['model']} model {why}; "
                      f"resume it as it ran: {resume_command(cfg, given.argv, then)}")


def run_model(out_dir):
    """The model a run folder trains (its config.json's), None where there is no readable one: a
    resumed run's keys are checked against its own model."""
    try:
        return json.load(open(os.path.join(out_dir, 'config.json'))).get('model')
    except (OSError, ValueError, AttributeError):
        return None


def save_run(cfg, model, opts, scaler, meta, it, best_val, data):
    """ckpt.pt with all an exact resume needs, every rank's RNG states included (collective): the
    CPU generator's and, on CUDA, the device's (Parcae draws its h_0 there); data: the record of
    the data it trained on (data_record), which a resume and tools.eval check."""
    dev = next(model.parameters()).device
    mine = (torch.get_rng_state(), torch.cuda.get_rng_state(dev) if dev.type == 'cuda' else None)
    states = [mine]
    if torch.distributed.is_initialized():
        states = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(states, mine)
    rng, cuda_rng = [s[0] for s in states], [s[1] for s in states]
    if cfg.get('sharded_checkpoint') and fsdp_model(model):
        name, optimizers = save_shards(cfg['out_dir'], model, opts, it)
        states = {'sharded': name, 'optimizers': optimizers}
    else:
        weights, optimizers = model_states(model, opts)
        states = {'model': weights, 'optimizers': optimizers}
    if int(os.environ.get('RANK', 0)) == 0:
        model_args = {f.name: getattr(model.config, f.name) for f in dataclasses.fields(model.config)}
        save_checkpoint(os.path.join(cfg['out_dir'], 'ckpt.pt'), {
            **states, 'scaler': scaler.state_dict(), 'model_name': cfg['model'], 'model_args': model_args,
            'config': cfg, 'meta': meta, 'iter_num': it, 'best_val_loss': best_val, 'rng': rng,
            'cuda_rng': cuda_rng, 'data': data})
        # only now that ckpt.pt names the new shards (or holds the states whole) do the old ones go
        for name in shard_folders(cfg['out_dir']):
            if name != states.get('sharded'):
                shutil.rmtree(os.path.join(cfg['out_dir'], name), ignore_errors=True)


SHARDS = '.ckpt.new'   # out_dir/.ckpt.new<iter>: the shards of a sharded checkpoint (sharded_checkpoint=True)


def shard_folders(out):
    """The names of out's folders of checkpoint shards."""
    try:
        return [n for n in os.listdir(out) if n.startswith(SHARDS) and os.path.isdir(os.path.join(out, n))]
    except OSError:
        return []


def dcp_error():
    """What torch.distributed.checkpoint raises for a failed read or write."""
    from torch.distributed.checkpoint.api import CheckpointException
    return CheckpointException


def save_shards(out, model, opts, it):
    """sharded_checkpoint=True (collective): every rank writes its shards of the FSDP model's states and of
    its stepped optimizers' (torch.distributed.checkpoint) into a folder of out that no ckpt.pt names, so
    a crash leaves ckpt.pt and the shards it names whole. Returns the folder's name and the optimizers
    as ckpt.pt holds them: None for those in the shards."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict
    taken = shard_folders(out)
    # a fresh name: a resumed run saves again at the iteration of the folder ckpt.pt names
    names = [next(n for n in [f"{SHARDS}{it}"] + [f"{SHARDS}{it}.{k}" for k in range(1, len(taken) + 2)] if n not in taken)]
    torch.distributed.broadcast_object_list(names)   # rank 0's listing: a rank may see another folder
    folder = os.path.join(out, names[0])
    # an optimizer without states yet (iteration 0) as it is: get_optimizer_state_dict would take a step to make them
    states = {'model': get_model_state_dict(model),
              'optimizers': {str(k): get_optimizer_state_dict(model, o) for k, o in enumerate(opts) if o.state}}
    try:
        dcp.save(states, checkpoint_id=folder)
    except dcp_error() as e:
        if int(os.environ.get('RANK', 0)) == 0:
            shutil.rmtree(folder, ignore_errors=True)
        raise ConfigError(f"cannot write the checkpoint's shards to {folder}: {str(e).splitlines()[0][:200]}; "
                          f"removed it, {os.path.join(out, 'ckpt.pt')} is as it was") from None
    return names[0], [None if o.state else o.state_dict() for o in opts]


def load_shards(model, opts, ckpt, out):
    """A sharded checkpoint's states into an FSDP model and its optimizers, resharded to this world (collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (get_model_state_dict, get_optimizer_state_dict,
                                                         set_model_state_dict, set_optimizer_state_dict)
    folder = shards_path(out, ckpt)
    stepped = {str(k): o for k, (o, s) in enumerate(zip(opts, ckpt['optimizers'])) if s is None}
    states = {'model': get_model_state_dict(model),
              'optimizers': {k: get_optimizer_state_dict(model, o) for k, o in stepped.items()}}
    dcp.load(states, checkpoint_id=folder)
    set_model_state_dict(model, states['model'])
    for k, o in stepped.items():
        set_optimizer_state_dict(model, o, states['optimizers'][k])


def shards_path(out, ckpt):
    """The folder of a sharded checkpoint's shards; one line where it is gone."""
    folder = os.path.join(out, ckpt['sharded'])
    if not os.path.isdir(folder):
        raise ConfigError(f"{os.path.join(out, 'ckpt.pt')} keeps its weights in the folder {folder} beside it, which "
                          f"is not there: copy it back from where ckpt.pt came from")
    return folder


def read_shards(out, ckpt):
    """A sharded checkpoint's model and optimizer states whole, as a gathered ckpt.pt holds them
    (optimizer states keyed by parameter index), read in this process alone."""
    from torch.distributed.checkpoint import FileSystemReader
    # the loader dcp_to_torch_save runs, without its detour through a file; torch 2.13 has no public one
    from torch.distributed.checkpoint.format_utils import _EmptyStateDictLoadPlanner, _load_state_dict
    folder, states = shards_path(out, ckpt), {}
    try:
        _load_state_dict(states, storage_reader=FileSystemReader(folder), planner=_EmptyStateDictLoadPlanner(),
                         no_dist=True)
    except (dcp_error(), OSError, RuntimeError) as e:
        raise ConfigError(f"the checkpoint shards in {folder} are unreadable ({type(e).__name__}: "
                          f"{str(e).splitlines()[0][:120] if str(e) else 'no detail'}): train again or restore a copy")
    opts = states.get('optimizers', {})
    return {'model': states['model'],
            'optimizers': [s if s is not None else by_number(opts[str(k)]) for k, s in enumerate(ckpt['optimizers'])]}


def by_number(state):
    """An optimizer state dict keyed by parameter name as Optimizer.state_dict() keys it: by the
    parameters' numbers in the order of its groups (a gathered state on a rank but 0: empty, as it is)."""
    if not state:
        return state
    ids = {n: i for i, n in enumerate(n for g in state['param_groups'] for n in g['params'])}
    return {'state': {ids[n]: s for n, s in state['state'].items()},
            'param_groups': [{**g, 'params': [ids[n] for n in g['params']]} for g in state['param_groups']]}


def fsdp_model(model):
    """Whether model is sharded by FSDP (train.py's parallel='fsdp' under torchrun)."""
    if model is None or not torch.distributed.is_initialized():
        return False
    from torch.distributed.fsdp import FSDPModule
    return isinstance(model, FSDPModule)


def model_states(model, opts):
    """The model's and its optimizers' state dicts as ckpt.pt holds them. An FSDP model's are gathered
    whole onto rank 0's CPU (collective; the other ranks get empty ones) in the layout an unsharded
    model writes: a tied weight one tensor, optimizer states keyed by parameter index."""
    if not fsdp_model(model):
        return model.state_dict(), [o.state_dict() for o in opts]
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_optimizer_state_dict
    whole = StateDictOptions(full_state_dict=True, cpu_offload=True)
    weights = get_model_state_dict(model, options=whole)
    first = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if weights:
            weights[name] = weights[first.setdefault(id(p), name)]
    # an optimizer without states yet (iteration 0) as it is: get_optimizer_state_dict would take a step to make them
    return weights, [by_number(get_optimizer_state_dict(model, o, options=whole)) if o.state else o.state_dict()
                     for o in opts]


def by_name(state, model, opt):
    """by_number undone for opt, whose parameters the checkpoint's indices number: keyed by their names in model."""
    names = {id(p): n for n, p in model.named_parameters()}
    fqns = [names[id(p)] for g in opt.param_groups for p in g['params']]
    return {'state': {fqns[i]: s for i, s in state['state'].items()},
            'param_groups': [{**g, 'params': [fqns[i] for i in g['params']]} for g in state['param_groups']]}


def diverged(what, run):
    """A non-finite loss stops the run with one line that says where its last good state is, and
    the command that starts again at a tenth of the learning rate."""
    cfg, last_good = run.cfg, run.last_good
    ckpt = os.path.join(cfg['out_dir'], 'ckpt.pt')
    lr = float(f"{cfg['learning_rate'] / 10:.3g}")
    lower = {'learning_rate': lr, 'min_lr': min(cfg['min_lr'], lr)}
    if last_good is None:
        fail(f"{what}, before the first checkpoint: start again with a lower learning_rate: "
             f"{command(run.given.argv, {**lower, 'overwrite': True})}")
    fail(f"{what}; {ckpt} still holds the last good state (iter {last_good}): start a new run from it with a lower "
         f"learning_rate (a resumed run keeps its recipe): {new_run_command({**cfg, **lower}, run.defaults)}")


class Stopped(KeyboardInterrupt):
    """SIGTERM (a scheduler ending a job) or SIGHUP (a closed terminal): Ctrl-C's treatment."""
    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def stop(signum, frame):
    """The handler of SIGTERM and SIGHUP while a run goes: they stop it as Ctrl-C does."""
    raise Stopped(signum)


def command(argv, add=None, drop=(), world=None):
    """A train.py command that a hint prints, to paste: argv (the user's config files and
    --key=value, as given) without the keys of drop and of add, then add's settings; launched as
    this run was (under torchrun: torchrun with this job's processes per node), or at world processes."""
    add = add or {}
    script = sys.argv[0] if os.path.basename(sys.argv[0]) == 'train.py' else 'train.py'
    total = int(os.environ.get('WORLD_SIZE', 1)) if world is None else world
    per_node = int(os.environ.get('LOCAL_WORLD_SIZE', total)) if world is None else world
    if ('TORCHELASTIC_RUN_ID' in os.environ and world is None) or total > 1:
        launch = (f"torchrun --standalone --nproc_per_node={per_node}" if total == per_node else
                  f"torchrun --nnodes={total // per_node} --nproc_per_node={per_node} (and this job's rendezvous flags)")
    else:
        launch = 'python'
    keys = set(drop) | set(add)
    args = [a for a in argv if not (a.startswith('--') and a[2:].partition('=')[0] in keys)]
    args += [f"--{k}={v if isinstance(v, str) else repr(v)}" for k, v in add.items()]
    return ' '.join([launch, shlex.quote(script)] + [shlex.quote(a) for a in args])


def resume_command(cfg, argv, world=None):
    """The command that continues the run in out_dir: this one's, resumed (world: at another world size)."""
    return command(argv, {'init_from': 'resume', 'out_dir': cfg['out_dir']}, world=world)


def run_settings(cfg, defaults):
    """The settings of a run as --key=value overrides: its model, and every key (the model's fields
    included) whose value is not the default; RUN_KEYS are the command's own."""
    fields = model_fields(cfg['model'])
    base = {**fields, **defaults}
    keys = ['model'] + [k for k in list(defaults) + list(fields) if k != 'model' and k not in RUN_KEYS]
    return {k: cfg[k] for k in dict.fromkeys(keys) if k in cfg and (k == 'model' or cfg[k] != base.get(k))}


def new_run_command(cfg, defaults):
    """The command that starts a new run from the weights in cfg's out_dir with its settings, in out_dir + '-new'."""
    return command([], {**run_settings(cfg, defaults), 'init_from': cfg['out_dir'],
                        'out_dir': cfg['out_dir'].rstrip('/') + '-new'})


def interrupted(run, signum=signal.SIGINT):
    """Ctrl-C, SIGTERM or SIGHUP: one line with the iteration reached and the command that
    continues; exit 128 + the signal's number (130, 143, 129), as the shell reports a kill."""
    cfg, it, last_good = run.cfg, run.iter, run.last_good
    code = 128 + int(signum)
    how = '' if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
    where = f" at iter {it}" if it is not None else ""
    if int(os.environ.get('RANK', 0)) != 0:
        sys.exit(code)
    if cfg is None or cfg['eval_only']:
        print(f"interrupted{how}{where} (nothing was written)", file=sys.stderr)
    elif last_good is None:
        back = run.aside and give_back(cfg, run.aside)
        print(f"interrupted{how}{where}, before the first checkpoint: nothing to resume" +
              ("; the run --overwrite was to replace is back in place" if back else ""), file=sys.stderr)
    else:
        print(f"interrupted{how}{where}; {os.path.join(cfg['out_dir'], 'ckpt.pt')} holds iter {last_good}: "
              f"continue with {resume_command(cfg, run.given.argv)}", file=sys.stderr)
    sys.exit(code)


ASIDE = 'replaced'   # out_dir/replaced/: the run that --overwrite replaces, until the new one has a checkpoint
# what a run writes into its folder (train.py; tools.eval's eval/ and compare/; tools.results' done.json):
# --overwrite sets these aside and nothing else
RUN_FILES = ('ckpt.pt', 'config.json', 'log.jsonl', 'eval', 'compare', 'done.json')


def run_files(out):
    """The names of out's own run files; a folder among them that holds a run of its own is not one."""
    def holds_run(path):
        return os.path.isdir(path) and any(os.path.exists(os.path.join(path, n)) for n in ('ckpt.pt', 'config.json'))
    return [n for n in RUN_FILES if os.path.lexists(os.path.join(out, n)) and not holds_run(os.path.join(out, n))] + \
        shard_folders(out)


def set_aside(cfg):
    """--overwrite over a trained run: move its files (run_files, nothing else: never another run's
    folder, never a file a run does not write) into out_dir/replaced/, where they stay until this
    run writes its first checkpoint. None when there is nothing to set aside."""
    out = cfg['out_dir']
    if not os.path.exists(os.path.join(out, 'ckpt.pt')):
        return None
    aside = os.path.join(out, ASIDE)
    if os.path.lexists(aside):
        raise ConfigError(f"{aside} holds a run that an interrupted --overwrite set aside: move its files back into "
                          f"{out} or delete it, then run again")
    try:
        os.makedirs(aside)
        for name in run_files(out):
            os.replace(os.path.join(out, name), os.path.join(aside, name))
    except OSError as e:
        back = give_back(cfg, aside)
        raise ConfigError(f"cannot set the replaced run aside in {aside}: {e.strerror or e}" +
                          ("" if back else f"; its files are in {aside}: move them back into {out}"))
    return aside


def give_back(cfg, aside):
    """Undo set_aside: this run's files go and the replaced run's come back. True when done."""
    out = cfg['out_dir']
    try:
        for name in run_files(out):
            path = os.path.join(out, name)
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
        for name in os.listdir(aside):
            os.replace(os.path.join(aside, name), os.path.join(out, name))
        os.rmdir(aside)
        return True
    except OSError:
        return False


def put_back(cfg):
    """An --overwrite killed before its first checkpoint leaves the run it replaced in
    out_dir/replaced/: the next start into out_dir (when no run holds it) puts it back, and says so."""
    out, aside = cfg['out_dir'], os.path.join(cfg['out_dir'], ASIDE)
    if int(os.environ.get('RANK', 0)) != 0 or os.path.exists(os.path.join(out, 'ckpt.pt')) \
            or not os.path.isfile(os.path.join(aside, 'ckpt.pt')):
        return
    lock, _ = lock_out_dir(out)
    if lock is None:    # the --overwrite run is still going
        return
    with lock:
        if give_back(cfg, aside):
            print(f"put back the run in {aside}, which an --overwrite interrupted before its first checkpoint had "
                  f"set aside", file=sys.stderr)


def peer_gone(e):
    """Whether e is what a collective raises when another rank has exited."""
    return isinstance(e, RuntimeError) and (isinstance(e, getattr(torch.distributed, 'DistError', ())) or any(
        w in str(e) for w in ('Connection closed', 'Connection reset', 'Broken pipe', 'peer')))



# ----------------------------------------------------------------------------- checkpoint files
CKPT_KEYS = ('model', 'model_name', 'model_args', 'config', 'iter_num')


def read_checkpoint(path, device='cpu', shards=True):
    """The checkpoint dict in an out_dir or a ckpt.pt file; a file torch cannot read, or one
    train.py did not write, is one line. hf:OWNER/NAME or a folder of the Parcae authors' format
    reads as one (pretrained.read_release). A sharded checkpoint (sharded_checkpoint=True) reads
    whole, as the file a gathered one is (shards=False: without its model and optimizer states)."""
    if pretrained.is_release(path):
        try:
            return pretrained.read_release(path, device)
        except ValueError as e:
            raise ConfigError(str(e)) from None
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
    # a sharded checkpoint's ckpt.pt names the folder of its weights
    missing = [k for k in CKPT_KEYS if not isinstance(ckpt, dict) or k not in ckpt and not (k == 'model' and 'sharded' in ckpt)]
    if missing:
        raise ConfigError(f"{path} is not a train.py checkpoint (it lacks {', '.join(missing)})")
    if shards and 'sharded' in ckpt:    # the dict a gathered ckpt.pt holds
        ckpt.update(read_shards(os.path.dirname(path), ckpt))
        del ckpt['sharded']
    return ckpt


def state_dict_error(e):
    """The first specific line of load_state_dict's error (a size mismatch, a missing key)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return (lines[1:] or lines or ['no detail'])[0][:300]


def load_weights(model, state, source):
    """model's weights from a state dict; weights of other shapes are one line naming source."""
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
    """Wraps a file so that the OSError of a failed write (a full disk) is kept: torch.save turns
    it into a RuntimeError that no longer says why."""
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


