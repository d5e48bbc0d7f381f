"""
How a run reads a prepared dataset and draws its batches, for train.py and the tools: a dataset's
meta and the checks made before reading it (read_meta, check_tokens: prepare_data.py writes what
they check), the data a run reads (load_data: its streams opened once and checked, the synthetic
battery made on the spot), the batch of any micro-step of any iteration on any rank (get_batch,
draw_batch: a function of the iteration alone), and the holes of FON's hole fine-tuning (make_holes).

    data = load_data(cfg, knobs)               # cfg: train.py's settings; knobs: the model's forward keywords
    x, y, kw = get_batch('train', it, micro, data)
    loss = model(x, y, **kw)[1]
"""
import dataclasses
import functools
import hashlib
import json
import os
import pickle
import zlib

import numpy as np
import torch

import run_folder
from configurator import ConfigError
from prepare_data import DATASETS, check_name, get_tokenizer, prepare, prepare_command


# ----------------------------------------------------------------------------- reading a prepared dataset
# what train.py and the tools check before they read one (prepare_data.py writes it): a mistake is one line
NANOGPT_VOCAB = 50304   # GPT-2's 50257 tokens padded to a multiple of 64, as nanoGPT's train.py pads them


def read_meta(cfg):
    """The dataset's meta (None: no data there): its meta.json, else nanoGPT's layout, named in meta['layout']:
    a meta.pkl (its char datasets) or no meta file beside train.bin (its GPT-2 BPE datasets, vocab 50304)."""
    folder = os.path.join(cfg['data_dir'], cfg['dataset'])
    path, pkl = os.path.join(folder, 'meta.json'), os.path.join(folder, 'meta.pkl')
    if os.path.isfile(path):
        try:
            meta = json.load(open(path, encoding='utf-8'))
        except (ValueError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path} is not valid JSON ({e}): re-run {prepare_command(cfg['dataset'])}")
    elif os.path.isfile(pkl):
        path, meta = pkl, read_meta_pkl(pkl)
    elif os.path.isfile(os.path.join(folder, 'train.bin')):
        return {'tokenizer': 'gpt2', 'vocab_size': NANOGPT_VOCAB,
                'layout': f"nanoGPT's, no meta file: the GPT-2 tokenizer, vocab {NANOGPT_VOCAB}"}
    else:
        return None
    sized = isinstance(meta, dict) and isinstance(meta.get('vocab_size'), int) and meta['vocab_size'] > 0
    if problem := (tokenizer_problem(meta) or record_problem(meta)) if sized else 'lacks a positive integer vocab_size':
        raise ConfigError(f"{path} {problem}: re-run {prepare_command(cfg['dataset'])}")
    return meta


class _PlainUnpickler(pickle.Unpickler):
    """nanoGPT's meta.pkl is a dict of ints and strings: no class is ever needed, so none is loaded
    (unpickling a class can run any code)."""
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"it names {module}.{name}")


def read_meta_pkl(path):
    """nanoGPT's meta.pkl as a char meta: itos as a list (nanoGPT pickles a dict id -> char)."""
    try:
        with open(path, 'rb') as f:
            raw = _PlainUnpickler(f).load()
    except Exception as e:   # truncated, not a pickle, or a class inside
        raise ConfigError(f"{path} is not nanoGPT's meta.pkl, a pickled dict of vocab_size, itos and stoi "
                          f"({type(e).__name__}: {e})")
    if not isinstance(raw, dict):
        return raw
    itos, stoi = raw.get('itos'), raw.get('stoi')
    itos = {i: c for c, i in stoi.items()} if itos is None and isinstance(stoi, dict) else itos
    itos = [itos.get(i) for i in range(len(itos))] if isinstance(itos, dict) else itos
    if itos is None:
        return {'vocab_size': raw.get('vocab_size'), 'layout': "nanoGPT's meta.pkl"}
    return {'vocab_size': raw.get('vocab_size'), 'layout': f"nanoGPT's meta.pkl: a char vocabulary of {len(itos)}",
            'tokenizer': 'char', 'itos': itos}


def tokenizer_problem(meta):
    """What keeps a meta's tokenizer from decoding (a char meta needs its itos table), else None."""
    kind, itos = meta.get('tokenizer'), meta.get('itos')
    if kind not in (None, 'gpt2', 'byte', 'char', 'json'):
        return f"names the tokenizer {kind!r}, not one of gpt2, byte, char, json"
    if kind == 'json' and not isinstance(meta.get('tokenizer_sha256'), str):
        return "has no tokenizer_sha256 (the sha256 of the tokenizer.json its ids come from)"
    itos = [itos.get(str(i)) for i in range(len(itos))] if isinstance(itos, dict) else itos
    if kind == 'char' and (not isinstance(itos, list) or not itos or not all(isinstance(c, str) for c in itos)):
        return "has no itos (a list of the char tokenizer's symbols, id -> character) to decode with"
    return None


def record_problem(meta):
    """What keeps a meta's max_id record (prepare_data.py's: split -> its largest id, beside {split}_tokens) from
    being checked, else None."""
    kept = meta.get('max_id', {})
    fits = lambda s, v: isinstance(v, int) and 0 <= v < 2 ** 16 and isinstance(meta.get(f'{s}_tokens'), int)
    if not isinstance(kept, dict) or not all(fits(s, v) for s, v in kept.items()):
        return "has a max_id that is not {split: its largest token id} beside each split's {split}_tokens"
    return None


def check_dataset(cfg, given):
    """The data a run names (a plain folder name) is there, before out_dir is looked at (so a typo'd
    --dataset is what a command into a trained run's out_dir hears of). The battery's datasets are
    made on the spot; a resume's data is its checkpoint's, and a dry run reads none."""
    for k in ('dataset', 'synth_dataset'):
        try:
            check_name(cfg[k])
        except ConfigError as e:
            raise ConfigError(f"{k}: {e}")
    if cfg['dry_run'] or (cfg['init_from'] == 'resume' and 'dataset' not in given):
        return
    if cfg['dataset'] not in DATASETS and read_meta(cfg) is None:
        raise ConfigError(no_data(cfg))


def no_data(cfg):
    # prepare_data.py lambada (the name under any tokenizer too) writes passages to score, not a token stream
    if prepare_command(cfg['dataset']).split()[2] == 'lambada':
        return ("lambada holds LAMBADA's test passages, which python -m tools.eval --out_dir=RUN --task=lambada scores; "
                "it is not a training set: name another --dataset")
    return (f"{os.path.join(cfg['data_dir'], cfg['dataset'])} holds no data (meta.json, or nanoGPT's train.bin with or "
            f"without meta.pkl): prepare the data first ({prepare_command(cfg['dataset'])})")


FULL_CHECK_BYTES = 2 ** 30   # a stream without a recorded max_id is read whole up to this size, else sampled
SAMPLES = 64                 # ... at this many stretches of 2**19 tokens (1 MiB) spread over it


def check_tokens(path, min_tokens, vocab_size=None, data=None, meta=None, split=None):
    """A .bin stream (data: the caller's memmap of it) holds whole uint16 tokens, at least min_tokens, each
    below vocab_size (when given). Where meta records the split's token count and largest id (prepare_data.py
    does), the file's size is checked against them and no id is read; else (a dataset prepared before, or
    nanoGPT's) the ids are read whole up to FULL_CHECK_BYTES, and a larger stream at SAMPLES places, with a note."""
    size = data.nbytes if data is not None else os.path.getsize(path)
    if size == 0 or size % 2:
        raise ConfigError(f"{path} holds {size} bytes, not a whole positive number of uint16 tokens (2 bytes each): "
                          f"prepare the data again")
    if size // 2 < min_tokens:
        raise ConfigError(f"{path} holds {size // 2} tokens, fewer than the {min_tokens} needed; lower --block_size")
    top = (meta or {}).get('max_id', {}).get(split)
    if top is not None and size // 2 != meta[f'{split}_tokens']:
        raise ConfigError(f"{path} holds {size // 2} tokens, but its meta.json records {meta[f'{split}_tokens']} "
                          f"(the file changed after it was prepared): prepare the data again")
    if vocab_size is None:
        return
    if top is None:
        top = largest_id(path, np.memmap(path, dtype=np.uint16, mode='r') if data is None else data)
    if top >= vocab_size:
        raise ConfigError(f"{path} holds token id {top}, outside the vocabulary of {vocab_size} "
                          f"(meta.json's vocab_size or --vocab_size); prepare the data again")


def largest_id(path, data):
    """The largest id of a stream without a record: every id up to FULL_CHECK_BYTES, else a sample."""
    if data.nbytes <= FULL_CHECK_BYTES:
        return int(np.max(data))
    n = 2 ** 19
    top = max(int(np.max(data[i:i + n])) for i in np.linspace(0, len(data) - n, SAMPLES, dtype=np.int64))
    print(f"note: {path} has no recorded max_id (prepared before prepare_data.py kept one, or nanoGPT's): its ids "
          f"were checked in {SAMPLES} MiB of its {data.nbytes / 2**20:,.0f} MiB; prepare it again for a full check")
    return top


def stream_record(f):
    """What tells a .bin stream (an open file) from another cheaply: its bytes, the sha256 of its first MiB."""
    size = os.fstat(f.fileno()).st_size
    f.seek(0)
    return {'bytes': size, 'head': hashlib.sha256(f.read(2 ** 20)).hexdigest()}


def data_record(cfg, meta, streams):
    """What a checkpoint records of its data: streams (name -> stream_record), vocab_size, meta.json's sha256."""
    path = os.path.join(cfg['data_dir'], cfg['dataset'], 'meta.json')
    digest = hashlib.sha256(open(path, 'rb').read()).hexdigest() if os.path.isfile(path) else None
    return {**streams, 'vocab_size': meta['vocab_size'], 'meta.json': digest}


def check_data(then, now, where, hint):
    """Stops (one line naming what changed) when the data found now is not the data a checkpoint recorded;
    then: its record (None: a checkpoint from before records); what the data found now lacks is not compared."""
    changed = []
    for k, v in (then or {}).items():
        if (w := now.get(k)) is None or w == v:
            continue
        if isinstance(v, dict):
            changed.append(f"{k}.bin holds {w['bytes']:,} bytes (then {v['bytes']:,})"
                           if v.get('bytes') != w.get('bytes') else f"{k}.bin's first MiB differs")
        else:
            changed.append(f"vocab_size is {w} (then {v})" if k == 'vocab_size' else f"{k} differs")
    if changed:
        raise ConfigError(f"the data in {where} is not what the checkpoint trained on ({'; '.join(changed)}): {hint}")


def example_starts(path, newline, T, data=None):
    """Where a window of T + 1 tokens holding whole examples (loss_on='answers') may start in a battery stream: 0
    and after each newline (newline: the ids of '\\n', one), to the last full window; data: the caller's memmap."""
    marks = path[:-4] + '_answers.bin'
    if not os.path.isfile(marks) or len(newline) != 1:
        raise ConfigError(f"loss_on='answers' needs {marks}, the answer marks of a synthetic dataset "
                          f"(python prepare_data.py hops, or synthetic)")
    data = np.memmap(path, dtype=np.uint16, mode='r') if data is None else data
    starts = np.concatenate([[0], np.flatnonzero(data == newline[0]) + 1])
    if (longest := int(np.diff(starts).max())) > T + 1:
        raise ConfigError(f"loss_on='answers': {path} holds examples of up to {longest} tokens, so a window of "
                          f"block_size {T} may cut one; raise block_size to at least {longest - 1}")
    return starts[starts <= len(data) - T - 1]


def dataset_vocab(cfg, meta):
    """The model's vocab size: the config's, else the data's (one more when holes need a MASK id)."""
    need = meta['vocab_size'] if meta else None
    mid = cfg['mask_id'] if cfg['mask_id'] is not None else (meta or {}).get('mask_id', need)
    if cfg['p_fill'] > 0 and mid is not None:
        need = max(need, mid + 1)
    if cfg['vocab_size'] is None and need is None:
        raise ConfigError(f"vocab_size is not set and {cfg['data_dir']}/{cfg['dataset']}/meta.json does not exist; "
                          f"set --vocab_size or prepare the data ({prepare_command(cfg['dataset'])})")
    if cfg['vocab_size'] is not None and need is not None and cfg['vocab_size'] < need:
        raise ConfigError(f"vocab_size {cfg['vocab_size']} is smaller than the data needs ({need}, dataset '{cfg['dataset']}')")
    return need if cfg['vocab_size'] is None else cfg['vocab_size'], mid


# ----------------------------------------------------------------------------- the data a run reads
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


def load_data(cfg, knobs=(), rank=0, world=1, dev='cpu', ddp=False, then=None, hint='', argv=()):
    """The data get_batch reads on this process (rank of world, batches sent to dev; knobs: the
    model's forward keywords), once every stream is checked; then: the record of the data a resumed
    checkpoint trained on, which the data found now must match (else hint, what to run instead);
    argv: the command's, which a hint repeats. The battery's datasets (synthetic, quickstart, hops) are
    made on the spot, so python train.py works offline."""
    ds_dir = os.path.join(cfg['data_dir'], cfg['dataset'])
    if cfg['dataset'] in DATASETS and not os.path.isfile(os.path.join(ds_dir, 'meta.json')):
        err = None
        if rank == 0:
            try:
                prepare(cfg['dataset'], out_dir=cfg['data_dir'])
            except OSError as e:
                err = f"cannot write the {cfg['dataset']} data under data_dir {cfg['data_dir']}: {e.strerror or e}"
        run_folder.agree(err, ddp)
    meta = read_meta(cfg)
    if meta is None:
        raise ConfigError(no_data(cfg))
    check_same_tokenizer(cfg, meta, argv)
    paths = data_streams(cfg)
    for name, path in paths.items():
        if not os.path.isfile(path):
            need = cfg['synth_dataset'] if name.startswith('synth') else cfg['dataset']
            raise ConfigError(f"{path} not found: prepare the data first ({prepare_command(need)})"
                              if name != 'synth_train' else f"{path} not found: p_synth needs {prepare_command(need)}")
    streams, record = open_streams(paths)
    record = data_record(cfg, meta, record)
    check_data(then, record, ds_dir, f"resume on the data it trained on, or start a new run from its weights on "
                                     f"this data: {hint}")
    cfg['vocab_size'], mask = dataset_vocab(cfg, meta)
    for name, path in paths.items():   # rank 0 checks the ids (reads them where meta.json records no max_id)
        kept = read_meta({**cfg, 'dataset': cfg['synth_dataset']}) if name == 'synth_train' else meta
        check_tokens(path, cfg['block_size'] + 2, cfg['vocab_size'] if rank == 0 else None, data=streams[name][0],
                     meta=kept, split=name.removeprefix('synth_'))
    if cfg['loss_on'] == 'answers':
        streams.update(answer_windows(streams, paths, meta, cfg['block_size']))
    return Data(cfg, streams, mask, rank, world, dev, knobs, meta, record)


def check_same_tokenizer(cfg, meta, argv):
    """p_synth mixes synth_dataset's ids into the dataset's: both must come from one tokenizer."""
    if cfg['p_synth'] <= 0 or cfg['synth_dataset'] == cfg['dataset']:
        return
    synth = read_meta({**cfg, 'dataset': cfg['synth_dataset']})
    if synth is None:
        return      # load_data names the missing stream
    keys = ('tokenizer', 'bpe_vocab', 'itos', 'tokenizer_sha256')
    differ = [k for k in keys if synth.get(k) != meta.get(k)]
    if differ:
        said = lambda m: f"{m.get('tokenizer')} tokenizer, vocab_size {m.get('vocab_size')}"
        raise ConfigError(f"p_synth mixes {cfg['synth_dataset']}'s ids into {cfg['dataset']}'s, but they come from "
                          f"other tokenizers ({cfg['synth_dataset']}: {said(synth)}; {cfg['dataset']}: {said(meta)}; "
                          f"{', '.join(differ)} differ), so its ids would mean other tokens: name a synth_dataset prepared "
                          f"with {cfg['dataset']}'s tokenizer, or mix none in: {run_folder.command(argv, {'p_synth': 0.0})}")


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


def answer_windows(streams, paths, meta, T):
    """loss_on='answers' scores only the answers of a synthetic set, so its windows start where an
    example does: {'train_starts': positions, 'val_starts': positions} (example_starts)."""
    newline = get_tokenizer(meta)[0]('\n')
    return {f'{s}_starts': example_starts(paths[s], newline, T, data=streams[s][0]) for s in ('train', 'val')}


# ----------------------------------------------------------------------------- drawing a batch
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
