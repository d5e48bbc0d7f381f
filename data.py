"""
How train.py draws a batch, and tools.eval its eval set: the data a run reads (load_data: its
streams opened once and checked, the synthetic battery made on the spot), the batch of any
micro-step of any iteration on any rank (get_batch, draw_batch: a function of the iteration alone),
and the holes of FON's hole fine-tuning (make_holes).

    data = load_data(cfg, knobs)               # cfg: train.py's settings; knobs: the model's forward keywords
    x, y, kw = get_batch('train', it, micro, data)
    loss = model(x, y, **kw)[1]
"""
import dataclasses
import functools
import os
import zlib

import numpy as np
import torch

import run_folder
from configurator import ConfigError
from prepare_data import (check_data, check_name, check_tokens, data_record, dataset_vocab, example_starts, get_tokenizer, prepare,
                          prepare_hint, read_meta, stream_record)


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



def check_dataset(cfg, given):
    """The data a run names (a plain folder name) is there, before out_dir is looked at (so a typo'd
    --dataset is what a command into a trained run's out_dir hears of). The synthetic battery is
    made on the spot; a resume's data is its checkpoint's, and a dry run reads none."""
    for k in ('dataset', 'synth_dataset'):
        try:
            check_name(cfg[k])
        except ConfigError as e:
            raise ConfigError(f"{k}: {e}")
    if cfg['dry_run'] or (cfg['init_from'] == 'resume' and 'dataset' not in given):
        return
    if cfg['dataset'] != 'synthetic' and read_meta(cfg) is None:
        raise ConfigError(no_data(cfg))


def no_data(cfg):
    return (f"{os.path.join(cfg['data_dir'], cfg['dataset'])} holds no data (meta.json, or nanoGPT's train.bin with or "
            f"without meta.pkl): prepare the data first ({prepare_hint(cfg['dataset'])})")



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
    micro_batch_size (None: batch_size) that divides a process's share. None when the sequences
    do not divide by world."""
    seqs = cfg['batch_size'] * cfg['gradient_accumulation_steps']
    if seqs % world:
        return None
    share = seqs // world
    cap = cfg.get('micro_batch_size') or cfg['batch_size']
    batch = max(b for b in range(1, min(cap, share) + 1) if share % b == 0)
    return batch, share // batch




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


def load_data(cfg, knobs=(), rank=0, world=1, dev='cpu', ddp=False, then=None, hint='', argv=()):
    """The data get_batch reads on this process (rank of world, batches sent to dev; knobs: the
    model's forward keywords), once every stream is checked; then: the record of the data a resumed
    checkpoint trained on, which the data found now must match (else hint, what to run instead);
    argv: the command's, which a hint repeats. The synthetic battery is made on the spot, so
    python train.py works offline."""
    ds_dir = os.path.join(cfg['data_dir'], cfg['dataset'])
    if cfg['dataset'] == 'synthetic' and not os.path.isfile(os.path.join(ds_dir, 'meta.json')):
        err = None
        if rank == 0:
            try:
                prepare('synthetic', out_dir=cfg['data_dir'])
            except OSError as e:
                err = f"cannot write the synthetic data under data_dir {cfg['data_dir']}: {e.strerror or e}"
        run_folder.agree(err, ddp)
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
                                     f"this data: {hint}")
    cfg['vocab_size'], mask = dataset_vocab(cfg, meta)
    for name, path in paths.items():
        check_tokens(path, cfg['block_size'] + 2, cfg['vocab_size'] if rank == 0 else None,   # one rank reads every id
                     data=streams[name][0])
    if cfg['loss_on'] == 'answers':
        streams.update(answer_windows(streams, paths, meta, cfg['block_size']))
    return Data(cfg, streams, mask, rank, world, dev, knobs, meta, record)


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


# ----------------------------------------------------------------------------- hole fine-tuning's holes (FON section 4)
def make_holes(x, y, mask_id, g, p_fill, hole_stride=8, p_hole=0.15, answers=None):
    """The paper's two kinds of holes on a holed sequence (each with probability p_fill): in a
    sequence with a synthetic task's answer spans (answers (B, T) bool), every answer span is a
    hole (task-given); in one without, stride-8 self-holing: positions p % hole_stride == 0 are
    holes with probability p_hole. A hole's token never enters the input (mask_id); the target at
    a hole is that token itself; every other target stays the next token."""
    B, T = x.shape
    holed = torch.rand(B, 1, generator=g) < p_fill
    on_stride = (torch.arange(T) % hole_stride == 0)[None, :]
    holes = holed & on_stride & (torch.rand(B, T, generator=g) < p_hole)
    if answers is not None:
        task = answers.any(1, keepdim=True)
        holes = torch.where(task, holed & answers, holes)
    y = torch.where(holes, x, y)
    x = x.masked_fill(holes, mask_id)
    return x, y, holes
