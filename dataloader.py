"""
What the model reads: the dataset's meta.json and .bin streams checked, and the training and eval
batches, a pure function of (split, iteration, micro-step, rank), so a resumed run sees exactly
the batches the uninterrupted one would have; hole fine-tuning's holes (FON section 4) made on
them. train.py, eval.py and bench.py read data through here.
"""
import json
import math
import os
import zlib

import numpy as np
import torch

from configurator import ConfigError

def read_meta(cfg):
    """The dataset's meta.json (None when there is none); it must be JSON with a vocab_size."""
    path = os.path.join(cfg['data_dir'], cfg['dataset'], 'meta.json')
    if not os.path.isfile(path):
        return None
    try:
        meta = json.load(open(path, encoding='utf-8'))
    except (ValueError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path} is not valid JSON ({e}): re-run python prepare_data.py {cfg['dataset']}")
    if not isinstance(meta, dict) or not isinstance(meta.get('vocab_size'), int) or meta['vocab_size'] <= 0:
        raise ConfigError(f"{path} lacks a positive integer vocab_size: re-run python prepare_data.py {cfg['dataset']}")
    return meta


def check_tokens(path, min_tokens, vocab_size=None):
    """A .bin stream of uint16 token ids: whole tokens, at least min_tokens of them, and (when
    vocab_size is given) every id below it. One pass over the file for the ids."""
    size = os.path.getsize(path)
    if size == 0 or size % 2:
        raise ConfigError(f"{path} holds {size} bytes, not a whole positive number of uint16 tokens "
                          f"(2 bytes each): prepare the data again")
    if size // 2 < min_tokens:
        raise ConfigError(f"{path} holds {size // 2} tokens, fewer than the {min_tokens} needed; lower --block_size")
    if vocab_size is not None:
        top = int(np.max(np.memmap(path, dtype=np.uint16, mode='r')))
        if top >= vocab_size:
            raise ConfigError(f"{path} holds token id {top}, outside the vocabulary of {vocab_size} "
                              f"(meta.json's vocab_size or --vocab_size); prepare the data again")


def dataset_vocab(cfg, meta):
    """The model's vocab size: the config's, else the data's (one more when holes need a MASK id)."""
    need = meta['vocab_size'] if meta else None
    mid = cfg['mask_id'] if cfg['mask_id'] is not None else (meta or {}).get('mask_id', need)
    if cfg['p_fill'] > 0 and mid is not None:
        need = max(need, mid + 1)
    if cfg['vocab_size'] is None:
        if need is None:
            raise ConfigError(f"vocab_size is not set and {cfg['data_dir']}/{cfg['dataset']}/meta.json does not exist; "
                              f"set --vocab_size or prepare the data (python prepare_data.py {cfg['dataset']})")
        return need, mid
    if need is not None and cfg['vocab_size'] < need:
        raise ConfigError(f"vocab_size {cfg['vocab_size']} is smaller than the data needs ({need}, dataset '{cfg['dataset']}')")
    return cfg['vocab_size'], mid


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


def split_hint(cfg, world):
    """The values that would divide: the next gradient_accumulation_steps, or batch_size."""
    B, A = cfg['batch_size'], cfg['gradient_accumulation_steps']
    A2 = A * world // math.gcd(B * A, world)
    step = world // math.gcd(A, world)
    B2 = (B // step) * step or step
    return (f"batch_size * gradient_accumulation_steps = {B} * {A} sequences per iteration do not split over "
            f"{world} processes: pass --gradient_accumulation_steps={A2} ({B * A2} sequences) or --batch_size={B2} "
            f"({B2 * A} sequences)")


class Batches:
    """Training and eval batches, a pure function of (split, iteration, micro-step, rank), so a
    resumed run sees exactly the batches the uninterrupted one would have."""

    def __init__(self, cfg, rank=0, world=1, mask=None):
        self.cfg, self.rank, self.world, self.mask = cfg, rank, world, mask
        self.batch, self.accum = split_batch(cfg, world)   # micro-batch and micro-steps per process
        d = os.path.join(cfg['data_dir'], cfg['dataset'])
        self.paths = {s: os.path.join(d, f'{s}.bin') for s in ('train', 'val')}
        for p in self.paths.values():
            if not os.path.isfile(p):
                raise ConfigError(f"{p} not found: prepare the data first (python prepare_data.py {cfg['dataset']})")
        self.synth, self.perm = None, None
        if cfg['p_synth'] > 0:
            sd = os.path.join(cfg['data_dir'], cfg['synth_dataset'])
            self.synth = {s: os.path.join(sd, f'{s}.bin') for s in ('train', 'val')}
            if not os.path.isfile(self.synth['train']):
                raise ConfigError(f"{self.synth['train']} not found: p_synth needs python prepare_data.py {cfg['synth_dataset']}")
        # a synthetic stream's {split}_answers.bin marks its answer spans: the task-given holes
        streams = list(self.paths.values()) + list((self.synth or {}).values())
        self.marks = {p: p[:-4] + '_answers.bin' for p in streams if os.path.isfile(p[:-4] + '_answers.bin')}
        T = cfg['block_size']
        for s, p in self.paths.items():
            if len(np.memmap(p, dtype=np.uint16, mode='r')) <= T + 1:
                raise ConfigError(f"{p} holds fewer than block_size+2 = {T + 2} tokens; lower --block_size")

    def generator(self, *key):
        g = torch.Generator()
        g.manual_seed(zlib.crc32(repr((self.cfg['seed'], self.rank) + key).encode()))
        return g

    def windows(self, path, n, g):
        """n random windows of block_size + 1 tokens and their answer marks (None: no marks file)."""
        data = np.memmap(path, dtype=np.uint16, mode='r')
        T = self.cfg['block_size']
        ix = torch.randint(len(data) - T - 1, (n,), generator=g).tolist()
        xy = torch.from_numpy(np.stack([data[i:i + T + 1].astype(np.int64) for i in ix]))
        if path not in self.marks:
            return xy, None
        mark = np.memmap(self.marks[path], dtype=np.uint8, mode='r')
        return xy, torch.from_numpy(np.stack([mark[i:i + T + 1] for i in ix])).bool()

    def blocks(self, path, n, step):
        """Non-overlapping blocks of block_size+1 tokens: one shuffle per pass, no replacement."""
        data = np.memmap(path, dtype=np.uint16, mode='r')
        L = self.cfg['block_size'] + 1
        nblocks = len(data) // L
        out = []
        for k in range(n):
            j = (step * n + k) * self.world + self.rank          # global draw index, over all ranks
            epoch, j = divmod(j, nblocks)
            if self.perm is None or self.perm[0] != epoch:     # the same shuffle on every rank
                g = torch.Generator().manual_seed(zlib.crc32(repr((self.cfg['seed'], 'blocks', epoch)).encode()))
                self.perm = (epoch, torch.randperm(nblocks, generator=g))
            b = self.perm[1][j].item()
            out.append(torch.from_numpy(data[b * L:(b + 1) * L].astype(np.int64)))
        return torch.stack(out)

    def get(self, split, it, micro=0):
        cfg, n = self.cfg, self.batch
        g = self.generator(split, it, micro)
        training = split == 'train' and it >= 0   # eval sets use negative iterations: plain LM batches
        marks = None
        if cfg['sampler'] == 'blocks' and training:
            xy = self.blocks(self.paths[split], n, it * self.accum + micro)
        else:
            xy, marks = self.windows(self.paths[split], n, g)
        if self.synth is not None and training:
            use = torch.rand(n, generator=g) < cfg['p_synth']
            if use.any():
                xy[use], synth_marks = self.windows(self.synth[split], int(use.sum()), g)
                if synth_marks is not None:
                    marks = torch.zeros_like(xy, dtype=torch.bool) if marks is None else marks
                    marks[use] = synth_marks
        x, y = xy[:, :-1].clone(), xy[:, 1:].clone()
        holes = None
        if cfg['p_fill'] > 0 and training:
            x, y, holes = make_holes(x, y, cfg, self.mask, g, None if marks is None else marks[:, :-1])
        return x, y, holes


def make_holes(x, y, cfg, mask, g, answers=None):
    """Hole fine-tuning (FON section 4), the paper's two kinds of holes on a holed sequence (p_fill):
    task-given, every answer span of a synthetic task in it (answers (B, T) bool marks them), or,
    in a sequence without answers, stride-8 self-holing: positions p % hole_stride == 0 become
    holes with probability p_hole. The hole's token never enters the input (mask id); the target
    at a hole is that token itself; every other target stays the next token."""
    B, T = x.shape
    holed = torch.rand(B, 1, generator=g) < cfg['p_fill']
    on_stride = (torch.arange(T) % cfg['hole_stride'] == 0)[None, :]
    holes = holed & on_stride & (torch.rand(B, T, generator=g) < cfg['p_hole'])
    if answers is not None:
        task = answers.any(1, keepdim=True)
        holes = torch.where(task, holed & answers, holes)
    y = torch.where(holes, x, y)
    x = x.masked_fill(holes, mask)
    return x, y, holes
