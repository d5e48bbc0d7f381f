"""
Evaluate a checkpoint (or compare several runs). Every result goes to --out (default
out_dir/eval/) as JSON, and as a PNG where there is something to plot.

    python -m tools.eval --out_dir=out                          # loss, perplexity, bits/token, bits/byte
    python -m tools.eval --out_dir=out --stream=True            # the whole held-out stream, block by block
    python -m tools.eval --out_dir=out --sweep=num_recur=1..24  # Parcae test-time depth + L(T) fit
    python -m tools.eval --out_dir=out --sweep=Ts=1,2,4,6,8     # TextNCA inference-time Ts
    python -m tools.eval --out_dir=out --extrapolate=256,512,1024,2048
    python -m tools.eval --out_dir=out --infill=True --battery=True
    python -m tools.eval --compare out-fon_cpu_battery_ft_{fon,gpt,mamba2} --battery    # FON Table 8: fill mode
    python -m tools.eval --out_dir=out --nca_steps=True --gates=True   # TextNCA Fig. 8 / Fig. 10
    python -m tools.eval --compare out-gpt_140m out-parcae_140m   # Markdown table + loss curves
    python -m tools.eval --compare out-fon_d256_t1 out-fon_tf_d256 --extrapolate=256,512,1024,2048   # extrapolation, one figure
    python -m tools.eval --out_dir=out --num_recur=16           # any forward knob, passed to every call
    python -m tools.eval --out_dir=out --task=lambada           # LAMBADA (tools.lambada), after python prepare_data.py lambada

Scoring. Default: train.py's own eval set (batches.get(split, -1 - k), k < eval_iters, with the
checkpoint's seed, batch_size and block_size), so the val loss equals the one train.py logged.
--stream=True: every complete block of block_size + 1 tokens of the split's stream, in order,
the first token of a block context only, the trailing incomplete block dropped and the last short
batch kept (the causal-workspace paper's protocol); a loss_on=answers run's: every example once, in
a window from its start, its own answers scored. Loss is the mean NLL over scored targets; bits
per token = loss / ln 2; bits per byte = total NLL / ln 2 / the UTF-8 bytes the scored targets
stand for (byte tokenizer: 1 per symbol, the row separator included, as the workspace paper
counts it; char: the character's bytes; gpt2: the token's bytes). A checkpoint trained with
causal=False (a BERT-style encoder) is scored as train.py scores it: every sequence (or stream
block) holed, full attention, the loss at the holes only.

Analyses (each one figure): --sweep KNOB=V1,V2,... or KNOB=A..B for any knob of forward; for
num_recur (or with --fit=True) the fit L(T) = L_inf + Z exp(-z T) (Parcae section 5.3), both
eval_sweep.py's, see its docstring. --extrapolate: loss at each eval length on non-overlapping val
blocks (same targets budget per length); a model with learned positions cannot go past its table:
NaN with a note. --infill and --battery (with --compare, too: Table 8's layout) are eval_fill.py's,
see its docstring; --battery reads the split's own examples, the test split too (--split=test, where
prepare_data.py --n_test wrote one).
"""
import json
import math
import os
import sys

import numpy as np
import torch

import configurator
import data
import models
import run_folder
import train
from configurator import ConfigError, check, parse_args
from prepare_data import get_tokenizer, gpt2_encoding, prepare_command
from tools import lambada
from tools.eval_fill import compare_battery, run_battery, run_infill
from tools.eval_sweep import parse_values, run_sweep
from tools.report import axes, save_figure, write_json

# ----------------------------------------------------------------------------- defaults
out_dir = 'out'
split = 'val'
eval_iters = None        # None: the checkpoint's (train.py's eval set)
batch_size = None        # None: the checkpoint's
seed = None              # None: the checkpoint's (the eval set is a function of it)
data_dir = None          # None: the checkpoint's
dataset = None           # None: the checkpoint's
stream = False           # score the whole split stream block by block
sweep = ''               # 'KNOB=V1,V2,...' or 'KNOB=A..B'
max_points = 64          # a sweep of more points stops with a line: raise it to run a longer one
max_depth = 1000         # a loop depth (num_recur, Ts) above this stops with a line: raise it to run deeper
fit = False              # fit L(T) = L_inf + Z exp(-z T) to the sweep (always for num_recur)
extrapolate = None       # 256,512,1024,2048 (lengths), or True for 1, 2, 4, 8 x the training length
infill = False
battery = False
battery_n = 100          # examples per task
baseline_from = ''       # --infill: the checkpoint without hole fine-tuning ('': the run's init_from)
nca_steps = False        # TextNCA: loss after every NCA step (model.step_losses)
gates = False            # TextNCA: mean update/reset gates per step (model.gate_stats)
compare = ''             # run folders (python -m tools.eval --compare out-a out-b ...)
task = ''                # 'lambada': tools.lambada's score instead (run_lambada: the keys it passes on)
out = ''                 # '': out_dir/eval (compare: the first run's folder/compare)
device = 'auto'
dtype = 'auto'
DEFAULTS = configurator.defaults_of(globals())
FLAGS = ('stream', 'fit', 'infill', 'battery', 'nca_steps', 'gates')


# ----------------------------------------------------------------------------- small helpers
def split_argv(argv):
    """eval.py's argv as configurator arguments: `--compare a b c` collects the folders,
    `--sweep X` / `--extrapolate X` become `--key=X`, a bare flag means True, one bare
    folder is out_dir."""
    args, runs, i = [], [], 0
    while i < len(argv):
        a = argv[i]
        if a == '--compare':
            while i + 1 < len(argv) and not argv[i + 1].startswith('--'):
                runs.append(argv[i + 1])
                i += 1
            if not runs:
                raise ConfigError('--compare needs run folders: --compare out-a out-b ...')
        elif a in ('--sweep', '--extrapolate') and i + 1 < len(argv) and not argv[i + 1].startswith('--'):
            args.append(f'{a}={argv[i + 1]}')
            i += 1
        elif a[2:] in FLAGS:
            args.append(a + '=True')
        elif not a.startswith('--'):
            if not os.path.isdir(a):
                raise ConfigError(f"eval.py takes --key=value arguments and a run folder; {a!r} is neither")
            args.append(f'--out_dir={a}')
        else:
            args.append(a)
        i += 1
    return args, runs


def check_depth(knobs, max_depth):
    """A loop depth far beyond any trained one runs for hours without a word: stop and say how to ask for it."""
    for k in models.DEPTH_KNOBS:
        if isinstance(knobs.get(k), int) and knobs[k] > max_depth:
            raise ConfigError(f"{k}={knobs[k]} runs the loop {knobs[k]} times per token, above max_depth={max_depth}: "
                              f"pass --max_depth={knobs[k]} to run it anyway")
    return knobs


# ----------------------------------------------------------------------------- scoring
def token_bytes(meta, vocab_size):
    """UTF-8 bytes each token id stands for (for bits per byte); 0 for ids outside the
    tokenizer (MASK, padding rows). None when the tokenizer cannot be loaded."""
    if not meta:
        return None
    table = np.zeros(vocab_size, dtype=np.int64)
    kind = meta.get('tokenizer')
    if kind == 'byte':
        table[:min(257, vocab_size)] = 1   # the row separator 256 is a scored symbol (workspace paper)
    elif kind == 'char':
        _, decode = get_tokenizer(meta)
        for i in range(min(meta['vocab_size'], vocab_size)):
            table[i] = len(decode([i]).encode('utf-8'))
    elif kind == 'gpt2':
        try:
            enc = gpt2_encoding(meta.get('bpe_vocab'))
        except Exception:
            return None
        for i in range(min(enc.n_vocab, vocab_size)):
            try:
                table[i] = len(enc.decode_single_token_bytes(i))
            except KeyError:
                pass
    else:
        return None
    return table


def stream_batches(path, block_size, batch_size):
    """(x, y) over every complete block of block_size + 1 tokens of a .bin stream, in order; the
    last batch may be short, the incomplete trailing block is dropped."""
    tokens = np.memmap(path, dtype=np.uint16, mode='r')
    L = block_size + 1
    n = len(tokens) // L
    for b0 in range(0, n, batch_size):
        b1 = min(n, b0 + batch_size)
        xy = torch.from_numpy(tokens[b0 * L:b1 * L].astype(np.int64)).view(b1 - b0, L)
        yield xy[:, :-1].contiguous(), xy[:, 1:].contiguous()


def symbols(meta):
    """What the ids of a dataset's meta stand for: its tokenizer, vocab_size, BPE size and char map."""
    itos, stoi = meta.get('itos'), meta.get('stoi')
    if isinstance(itos, dict):
        itos = [itos.get(str(i)) for i in range(len(itos))]
    elif itos is None and isinstance(stoi, dict):
        itos = sorted(stoi, key=stoi.get)
    return {'tokenizer': meta.get('tokenizer'), 'vocab_size': meta.get('vocab_size'),
            'bpe_vocab': meta.get('bpe_vocab'), 'itos': list(itos) if itos is not None else None}


def check_vocabulary(saved, meta, where, trained_on):
    """The data's ids mean what the checkpoint's did (its saved meta): another tokenizer or char map would
    score (and write) numbers about other symbols."""
    if not isinstance(saved, dict) or meta is saved:
        return
    a, b = symbols(saved), symbols(meta)
    diff = [f"{k} {b[k]!r} (checkpoint: {a[k]!r})" for k in ('tokenizer', 'vocab_size', 'bpe_vocab') if a[k] != b[k]]
    if not diff and a['itos'] is not None and b['itos'] is not None and a['itos'] != b['itos']:
        gone, new = sorted(set(a['itos']) - set(b['itos'])), sorted(set(b['itos']) - set(a['itos']))
        diff = [f"char map: {len(gone)} characters missing ({''.join(gone)[:20]!r}), {len(new)} new ({''.join(new)[:20]!r})"
                if gone or new else "char map: the same characters with other ids"]
    if diff:
        raise ConfigError(f"{where}/meta.json does not match the vocabulary this checkpoint was trained with "
                          f"(dataset '{trained_on}'): {', '.join(diff)}; its ids stand for other symbols")


class Evaluator:
    """A loaded checkpoint with its data, device and knobs."""

    def __init__(self, cfg, knobs):
        self.opt = cfg
        self.dev, self.ptdtype, self.ctx = models.resolve_device(cfg['device'], cfg['dtype'])
        self.model, ckpt = run_folder.load_checkpoint(cfg['out_dir'], self.dev)
        if ckpt.get('release'):   # the Parcae authors' weights: no dataset here is in their tokenizer
            raise ConfigError(f"{cfg['out_dir']} is a release of the Parcae authors, whose tokenizer.json no dataset here "
                              f"uses: score it on LAMBADA with python -m tools.eval --out_dir={cfg['out_dir']} "
                              f"--task=lambada (tools.lambada; python prepare_data.py lambada first)")
        self.model.eval()
        self.name = ckpt['model_name']
        self.knob_names = [k for k in self.model.knobs if k != 'holes']
        bad = [k for k in knobs if k not in self.knob_names]
        if bad:
            known = sorted(set(DEFAULTS) | set(self.knob_names))
            raise ConfigError(f"unknown key '{bad[0]}': not an eval.py key nor a knob of {self.name}'s forward "
                              f"(knobs: {', '.join(self.knob_names) or 'none'}; keys: {', '.join(known)})")
        self.knobs = check_depth(models.check_knobs(knobs), cfg['max_depth'])
        self.tcfg = dict(ckpt['config'])   # the full training config
        self.trained_on = self.tcfg['dataset']
        self.iter_num = ckpt.get('iter_num')
        for k in ('batch_size', 'seed', 'data_dir', 'dataset', 'eval_iters'):
            if cfg[k] is not None:
                self.tcfg[k] = cfg[k]
        self.meta = data.read_meta(self.tcfg) or ckpt.get('meta')
        if self.meta is None:
            raise ConfigError(f"{self.tcfg['data_dir']}/{self.tcfg['dataset']} holds no data (meta.json, or nanoGPT's "
                              f"train.bin with or without meta.pkl): eval needs the checkpoint's data (set --data_dir / --dataset)")
        if data.tokenizer_problem(self.meta):
            raise ConfigError(f"the meta in the checkpoint in {cfg['out_dir']} {data.tokenizer_problem(self.meta)}")
        self.vocab = self.model.config.vocab_size
        if self.tcfg['dataset'] == ckpt['config'].get('dataset'):   # the run's own data, as it trained on it
            self.check_data(ckpt.get('data'))
        path = os.path.join(self.tcfg['data_dir'], self.tcfg['dataset'], f"{cfg['split']}.bin")
        if os.path.isfile(path):   # a missing one is named where it is read
            data.check_tokens(path, 1, self.vocab, meta=self.meta, split=cfg['split'])
        mid = self.tcfg.get('mask_id')
        self.mask_id = mid if mid is not None else self.meta.get('mask_id', self.meta['vocab_size'])
        check_vocabulary(ckpt.get('meta'), self.meta, f"{self.tcfg['data_dir']}/{self.tcfg['dataset']}", self.trained_on)
        self.bytes = token_bytes(self.meta, self.vocab)
        self.accepts_holes = 'holes' in self.model.knobs
        # trained with causal=False (train.py): a masked-reconstruction encoder, scored at holes with full attention
        self.causal = self.tcfg.get('causal', True)
        self.answers_only = self.tcfg.get('loss_on') == 'answers'   # scored where it trained: the answer spans
        self.starts = {}     # (split, block_size) -> where its windows may start (loss_on='answers')
        self.streams = {}    # split -> its (tokens, answer marks) as data.open_streams opens them

    def check_data(self, then):
        """Stops when the data is not what the checkpoint recorded it trained on (sizes, heads, meta.json)."""
        streams = {}
        for split in ('train', 'val'):
            path = os.path.join(self.tcfg['data_dir'], self.tcfg['dataset'], f'{split}.bin')
            if os.path.isfile(path):
                with open(path, 'rb') as f:
                    streams[split] = data.stream_record(f)
        data.check_data(then, data.data_record(self.tcfg, self.meta, streams),
                        os.path.join(self.tcfg['data_dir'], self.tcfg['dataset']),
                        "evaluate it on the data it trained on (--data_dir), or train again on this data")

    def generator(self, *key):
        """Seeded as data.draw_batch seeds a batch on rank 0."""
        return data.batch_generator(self.tcfg, 0, *key)

    def eval_batch(self, split, k):
        """Batch k of train.py's eval set: data.draw_batch at iteration -1 - k on one process (a
        causal=False run's holed and scored at its holes, as train.py scores them)."""
        T = self.tcfg['block_size']
        path = os.path.join(self.tcfg['data_dir'], self.tcfg['dataset'], f'{split}.bin')
        if not os.path.isfile(path):
            raise ConfigError(f"{path} not found: prepare the data first ({prepare_command(self.tcfg['dataset'])})")
        if split not in self.streams:
            self.streams[split] = data.open_streams({split: path})[0][split]
        streams = {split: self.streams[split]}
        if len(streams[split][0]) <= T + 1:
            raise ConfigError(f"{path} holds fewer than block_size+2 = {T + 2} tokens; lower --block_size")
        if self.answers_only:   # train.py's windows of such a run start where an example does
            streams[f'{split}_starts'] = self.example_starts(path, split, T, streams[split][0])
        x, y, holes = data.draw_batch(split, -1 - k, 0, {**train.DEFAULTS, **self.tcfg}, streams, self.mask_id)
        return (x, y, None) if self.causal else (x, data.hole_targets(y, holes), holes)

    def example_starts(self, path, split, T, tokens):
        """Where a window of T + 1 tokens holding a whole example may start: one scan of the stream, not one per batch."""
        if (split, T) not in self.starts:
            self.starts[split, T] = data.example_starts(path, get_tokenizer(self.meta)[0]('\n'), T, tokens)
        return self.starts[split, T]

    def example_batches(self, path, split, T, bs):
        """A loss_on='answers' run's stream: (x, y, starts) over a window at every example's start, in
        order, as train.py's windows start (a window that began mid-example would hold another
        example's listing before its own, which such a run never saw)."""
        tokens = np.memmap(path, dtype=np.uint16, mode='r')
        starts = self.example_starts(path, split, T, tokens)
        for b0 in range(0, len(starts), bs):
            ix = starts[b0:b0 + bs].tolist()
            xy = torch.from_numpy(np.stack([tokens[i:i + T + 1].astype(np.int64) for i in ix]))
            yield xy[:, :-1].clone(), xy[:, 1:].clone(), ix

    def answer_targets(self, x, y, split, starts, first_only=False):
        """A loss_on='answers' run's targets, its windows starting at an example (train.py's, the
        stream's): the answer tokens ({split}_answers.bin) in the window, -1 elsewhere. first_only: those
        of the example the window starts with (the stream's: each answer scored once)."""
        path = os.path.join(self.tcfg['data_dir'], self.tcfg['dataset'], f'{split}_answers.bin')
        if not os.path.isfile(path):
            raise ConfigError(f"{path} not found: this run trained on the answer spans only (loss_on='answers')")
        mark = np.memmap(path, dtype=np.uint8, mode='r')
        marks = torch.from_numpy(np.stack([mark[i + 1:i + 1 + y.shape[1]] for i in starts])).bool()
        if first_only:      # target j is token j + 1 of the window: none from the example's newline on
            newline = get_tokenizer(self.meta)[0]('\n')[0]
            for r in range(len(x)):
                after = (x[r] == newline).nonzero()
                if len(after):
                    marks[r, int(after[0]):] = False
        return y.masked_fill(~marks, -1)

    def holed(self, x, y, split, starts, g):
        """A causal=False run's reading of (x, y): every sequence holed as train.py holes its eval
        set (the task-given answer spans where {split}_answers.bin marks them, else stride
        self-holing), the targets there only. starts: each row's offset in the stream."""
        path = os.path.join(self.tcfg['data_dir'], self.tcfg['dataset'], f'{split}_answers.bin')
        marks = None
        if os.path.isfile(path):
            mark = np.memmap(path, dtype=np.uint8, mode='r')
            marks = torch.from_numpy(np.stack([mark[i:i + x.shape[1]] for i in starts])).bool()
        x, y, holes = data.make_holes(x, y, self.mask_id, g, 1.0, self.tcfg['hole_stride'], self.tcfg['p_hole'], marks)
        return x, y.masked_fill(~holes, -1), holes

    def forward(self, x, y=None, **extra):
        kw = {**self.knobs, **extra}
        if 'holes' in kw and not self.accepts_holes:
            kw.pop('holes')
        with self.ctx:
            return self.model(x.to(self.dev), None if y is None else y.to(self.dev), **kw)

    def data_batches(self, split, block_size=None, max_targets=None):
        """The (x, y, holes) batches scoring walks through: train.py's eval set, or the stream."""
        T = block_size or self.tcfg['block_size']
        if self.opt['stream'] or block_size is not None:
            path = os.path.join(self.tcfg['data_dir'], self.tcfg['dataset'], f'{split}.bin')
            if not os.path.isfile(path):
                raise ConfigError(f"{path} not found")
            bs = max(1, self.tcfg['batch_size'] * self.tcfg['block_size'] // T)
            seen = 0
            batches = (self.example_batches(path, split, T, bs) if self.answers_only else
                       ((x, y, [(b * bs + r) * (T + 1) for r in range(len(x))])   # each block's offset in the stream
                        for b, (x, y) in enumerate(stream_batches(path, T, bs))))
            for b, (x, y, starts) in enumerate(batches):
                if max_targets is not None and seen >= max_targets:
                    break
                if max_targets is not None and seen + y.numel() > max_targets:
                    keep = max(1, (max_targets - seen) // T)
                    x, y, starts = x[:keep], y[:keep], starts[:keep]
                seen += y.numel()
                if self.answers_only:
                    y = self.answer_targets(x, y, split, starts, first_only=True)
                if not self.causal:     # every block holed, with a generator of its own
                    yield self.holed(x, y, split, starts, self.generator('stream', split, T, b))
                    continue
                yield x, y, None
            return
        for k in range(self.tcfg['eval_iters']):
            yield self.eval_batch(split, k)

    @torch.no_grad()
    def score(self, split, block_size=None, max_targets=None, **extra):
        """Mean NLL (the model's own loss, weighted by scored targets), perplexity, bits."""
        nll, n, nbytes = 0.0, 0, 0
        for x, y, holes in self.data_batches(split, block_size, max_targets):
            kw = dict(extra)
            if holes is not None and self.accepts_holes:
                kw['holes'] = holes.to(self.dev)
            if not self.causal:      # the loss at the holes (y is -1 elsewhere), full attention
                kw['causal'] = False
            k = int((y != -1).sum())
            if k == 0:
                continue
            _, loss = self.forward(x, y, **kw)
            nll += loss.double().item() * k
            n += k
            if self.bytes is not None:
                nbytes += int(self.bytes[y[y != -1].numpy()].sum())
        if n == 0:
            raise ConfigError(f"no {split} tokens to score (the stream is shorter than block_size + 1)")
        loss = nll / n
        return {'loss': loss, 'perplexity': math.exp(min(loss, 700)), 'bits_per_token': loss / math.log(2),
                'bits_per_byte': nll / math.log(2) / nbytes if nbytes else None, 'tokens': n, 'bytes': nbytes}

    def outpath(self, name):
        # another dataset's scores go beside the run's own, never onto them
        other = [self.tcfg['dataset']] if self.tcfg['dataset'] != self.trained_on else []
        d = self.opt['out'] or os.path.join(self.opt['out_dir'], 'eval', *other)
        os.makedirs(d, exist_ok=True)
        return os.path.join(d, name)

    def protocol(self):
        holes = '' if self.causal else ('; trained causal=False: full attention, the loss at the holes only (every '
                                        'sequence holed: answer spans, else stride self-holing)')
        if self.answers_only:
            holes += '; the answer spans only (trained with loss_on=answers)'
        if self.opt['stream'] and self.answers_only:
            return f"stream (every example once, in a window of {self.tcfg['block_size'] + 1} from its start){holes}"
        if self.opt['stream']:
            return f"stream (every complete block of {self.tcfg['block_size'] + 1}){holes}"
        return f"train.py eval set ({self.tcfg['eval_iters']} x {self.tcfg['batch_size']} x {self.tcfg['block_size']}){holes}"


# ----------------------------------------------------------------------------- analyses
def run_score(ev):
    split = ev.opt['split']
    r = ev.score(split)
    bpb = f"{r['bits_per_byte']:.4f}" if r['bits_per_byte'] is not None else 'n/a'
    print(f"{ev.name} {split}: loss {r['loss']:.4f}, perplexity {r['perplexity']:.3f}, "
          f"bits/token {r['bits_per_token']:.4f}, bits/byte {bpb}, {r['tokens']:,} tokens scored ({ev.protocol()})")
    write_json(ev.outpath(f"{'stream' if ev.opt['stream'] else 'score'}_{split}.json"),
               {'model': ev.name, 'split': split, 'protocol': ev.protocol(), 'knobs': ev.knobs, **r})
    return r


def extrapolation(ev):
    """Loss at each eval length (rows), on non-overlapping blocks from the start of the stream."""
    T0 = ev.tcfg['block_size']
    spec = ev.opt['extrapolate']
    if spec is True:
        lengths = [T0 * m for m in (1, 2, 4, 8)]
    elif isinstance(spec, (tuple, list)):
        lengths = list(spec)
    else:
        lengths = [spec] if isinstance(spec, int) else parse_values(spec)
    if not all(isinstance(v, int) and v > 0 for v in lengths):
        raise ConfigError(f"--extrapolate expects positive integer lengths, got {spec!r}")
    path = os.path.join(ev.tcfg['data_dir'], ev.tcfg['dataset'], f"{ev.opt['split']}.bin")
    n_stream = len(np.memmap(path, dtype=np.uint16, mode='r'))
    # about the same number of scored targets at every length (the whole stream with --stream)
    budget = None if ev.opt['stream'] else max(ev.tcfg['eval_iters'] * ev.tcfg['batch_size'] * T0, max(lengths))
    rows = []
    for L in lengths:
        row = {'length': L, 'loss': float('nan'), 'perplexity': float('nan'), 'tokens': 0, 'note': ''}
        if n_stream < L + 1:
            row['note'] = f'the {ev.opt["split"]} stream holds {n_stream} tokens, fewer than {L + 1}'
        else:
            try:
                r = ev.score(ev.opt['split'], block_size=L, max_targets=budget)
                row.update(loss=r['loss'], perplexity=r['perplexity'], tokens=r['tokens'])
            except (ValueError, IndexError, RuntimeError) as e:  # e.g. past a learned position table
                row['note'] = str(e).splitlines()[0][:200]
        rows.append(row)
    ref = next((r['loss'] for r in rows if r['length'] == T0 and math.isfinite(r['loss'])), None)
    for r in rows:
        r['delta_pct'] = 100 * (r['perplexity'] / math.exp(ref) - 1) if ref is not None else float('nan')
    return {'model': ev.name, 'run': ev.opt['out_dir'], 'train_length': T0, 'rows': rows,
            'protocol': 'non-overlapping blocks of length+1 from the start of the stream' +
                        ('' if budget is None else f', about {budget} targets per length')}


def plot_extrapolation(results, path):
    """One table and one figure for one or more runs; returns the number of plotted series."""
    print("| run | eval length | loss | perplexity | vs train length | tokens | note |\n|---|---|---|---|---|---|---|")
    for res in results:
        for r in res['rows']:
            print(f"| {res['run']} | {r['length']} | {r['loss']:.4f} | {r['perplexity']:.3f} | {r['delta_pct']:+.1f}% "
                  f"| {r['tokens']:,} | {r['note']} |")
    T0 = sorted({res['train_length'] for res in results})
    fig, ax = axes(f"length extrapolation (trained at {', '.join(map(str, T0))})", 'eval length (tokens)', 'loss (nats/token)')
    ax.set_xscale('log', base=2)
    for res in results:
        base = os.path.basename(os.path.normpath(res['run']))
        ax.plot([r['length'] for r in res['rows']], [r['loss'] for r in res['rows']], 'o-',
                label=base if base == res['model'] else f"{base} ({res['model']})")
    return save_figure(fig, ax, path)


def run_extrapolate(ev):
    res = extrapolation(ev)
    res['series'] = plot_extrapolation([res], ev.outpath('extrapolate.png'))
    write_json(ev.outpath('extrapolate.json'), res)
    return res


def run_nca_steps(ev):
    m = ev.model
    if not (hasattr(m, 'step_losses') and hasattr(m, 'step_names')):
        raise ConfigError(f"{ev.name} has no per-step losses (nca_steps needs model.step_losses and model.step_names)")
    Ts = ev.knobs.get('Ts')
    total, n = None, 0
    for x, y, _ in ev.data_batches(ev.opt['split']):
        with ev.ctx:
            losses = m.step_losses(x.to(ev.dev), y.to(ev.dev), Ts=Ts).double().cpu()
        total = losses if total is None else total + losses
        n += 1
    losses = (total / n).tolist()
    names = m.step_names(Ts)
    for name, l in zip(names, losses):
        print(f"{name}: {l:.4f}")
    fig, ax = axes(f"{ev.name}: loss after every NCA step", 'NCA step', f"{ev.opt['split']} loss (nats/token)")
    ax.plot(range(len(losses)), losses, 'o-')
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
    res = {'model': ev.name, 'steps': names, 'loss': losses, 'Ts': Ts or m.config.Ts}
    res['series'] = save_figure(fig, ax, ev.outpath('nca_steps.png'))
    write_json(ev.outpath('nca_steps.json'), res)
    return res


def run_gates(ev):
    m = ev.model
    if not hasattr(m, 'gate_stats'):
        raise ConfigError(f"{ev.name} has no gate statistics (gates needs model.gate_stats)")
    Ts = ev.knobs.get('Ts')
    acc, n, steps = {}, 0, None
    for x, _, _ in ev.data_batches(ev.opt['split']):
        try:
            with ev.ctx, torch.no_grad():
                s = m.gate_stats(x.to(ev.dev), Ts=Ts)
        except ValueError as e:
            raise ConfigError(str(e))
        steps = s.pop('steps')
        for k, v in s.items():
            acc[k] = acc.get(k, 0) + v.double().cpu()
        n += 1
    stats = {k: (v / n).tolist() for k, v in acc.items()}
    fig, ax = axes(f"{ev.name}: mean gate per NCA step", 'NCA step', 'gate value')
    for kind in ('update', 'reset'):
        if f'{kind}_mean' in stats:
            mu, sd = np.array(stats[f'{kind}_mean']), np.array(stats.get(f'{kind}_std', [0] * len(steps)))
            ax.plot(range(len(mu)), mu, 'o-', label=f'{kind} gate')
            ax.fill_between(range(len(mu)), mu - sd, mu + sd, alpha=0.2)
            print(f"{kind} gate mean per step: " + ' '.join(f'{v:.3f}' for v in mu))
    ax.set_xticks(range(len(steps)), steps, rotation=90, fontsize=7)
    res = {'model': ev.name, 'steps': steps, **stats,
           'note': 'mean and std over hidden dims of the per-dim mean over batch and positions'}
    res['series'] = save_figure(fig, ax, ev.outpath('gates.png'))
    write_json(ev.outpath('gates.json'), res)
    return res


# ----------------------------------------------------------------------------- compare
def read_run(path):
    """A run folder's config, model size and log (no weights are loaded)."""
    cfg_path, log_path = os.path.join(path, 'config.json'), os.path.join(path, 'log.jsonl')
    if os.path.isfile(cfg_path):
        try:
            cfg = json.load(open(cfg_path))
        except (ValueError, UnicodeDecodeError) as e:
            raise ConfigError(f"{cfg_path} is not valid JSON ({e})")
    elif os.path.isfile(os.path.join(path, 'ckpt.pt')):
        cfg = run_folder.read_checkpoint(path)['config']
    else:
        raise ConfigError(f"{path} is not a run folder (no config.json or ckpt.pt)")
    cfg = {k: tuple(v) if isinstance(v, list) else v for k, v in cfg.items()}
    with torch.device('meta'):
        m = models.build_model(cfg['model'], cfg)
    if os.path.exists(log_path) and not os.path.isfile(log_path):
        raise ConfigError(f"{log_path} is not a file: a run's log is the file train.py appends to; move that aside")
    log = []
    for line in open(log_path) if os.path.isfile(log_path) else []:
        try:
            log.append(json.loads(line))
        except ValueError:      # a line cut short by a kill
            pass
    tpi = cfg['batch_size'] * cfg['block_size'] * cfg['gradient_accumulation_steps']
    evals = [r for r in log if r.get('kind') == 'eval']
    trains = [r for r in log if r.get('kind') == 'train']
    last = evals[-1] if evals else {}
    return {'run': path, 'model': cfg['model'], 'dataset': cfg.get('dataset', '?'), 'params': m.num_params(),
            'flops_per_token': m.flops_per_token(cfg['block_size']),
            'tokens': last.get('tokens', last.get('iter', 0) * tpi), 'iter': last.get('iter'),
            'val_loss': last.get('val_loss', float('nan')),
            'perplexity': math.exp(last['val_loss']) if 'val_loss' in last else float('nan'),
            'train_curve': [(r['iter'] * tpi, r['loss']) for r in trains],
            'val_curve': [(r.get('tokens', r['iter'] * tpi), r['val_loss']) for r in evals]}


def run_compare(runs, opt):
    rows = [read_run(r) for r in runs]
    datasets = sorted({r['dataset'] for r in rows})
    if len(datasets) > 1:   # losses on different data (or tokenizers) do not compare
        print(f"warning: these runs were trained on different datasets ({', '.join(datasets)}): "
              f"their losses are not comparable", file=sys.stderr)
    print("| run | model | dataset | parameters | training tokens | FLOPs/token | val loss | perplexity |\n"
          "|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['run']} | {r['model']} | {r['dataset']} | {r['params'] / 1e6:.2f}M | {r['tokens']:,} "
              f"| {r['flops_per_token'] / 1e6:.1f}M | {r['val_loss']:.4f} | {r['perplexity']:.2f} |")
    d = opt['out'] or os.path.join(runs[0], 'compare')
    os.makedirs(d, exist_ok=True)
    fig, ax = axes('loss curves (train: lines, val: markers)', 'training tokens', 'loss (nats/token)')
    for i, r in enumerate(rows):
        base = os.path.basename(os.path.normpath(r['run']))
        label = base if base == r['model'] else f"{base} ({r['model']})"
        if r['train_curve']:
            t, l = zip(*r['train_curve'])
            ax.plot(t, l, '-', color=f'C{i}', alpha=0.6, lw=1, label=f'{label} train')
        if r['val_curve']:
            t, l = zip(*r['val_curve'])
            ax.plot(t, l, 'o--', color=f'C{i}', ms=4, label=f'{label} val')
    res = {'runs': rows, 'note': 'val loss: the last eval train.py logged (its eval_iters batches)'}
    res['series'] = save_figure(fig, ax, os.path.join(d, 'loss_curves.png'))
    write_json(os.path.join(d, 'compare.json'), res)
    if opt['battery']:       # every run's battery in fill mode, one table (Table 8's layout)
        res['battery'] = compare_battery((Evaluator({**opt, 'out_dir': r}, {}) for r in runs), d)
    if opt['extrapolate']:   # every run's extrapolation in one table and one figure
        ext = {'runs': [extrapolation(Evaluator({**opt, 'out_dir': r}, {})) for r in runs]}
        ext['series'] = plot_extrapolation(ext['runs'], os.path.join(d, 'extrapolate.png'))
        write_json(os.path.join(d, 'extrapolate.json'), ext)
        res['extrapolate'] = ext
    return res


# ----------------------------------------------------------------------------- LAMBADA
LAMBADA_KEYS = ('out_dir', 'device', 'dtype', 'batch_size', 'sweep', 'out', 'task')   # the eval keys it takes


def run_lambada(opt, given, runs):
    """--task=lambada: tools.lambada scores the run, given eval's keys that it takes, its own (input, init_from)
    and the model's knobs; its results go to lambada.json where eval's go."""
    other = ['compare'] if runs else [k for k in given if k in DEFAULTS and k not in LAMBADA_KEYS]
    if other:
        raise ConfigError(f"{other[0]} does not apply to --task=lambada, which takes {', '.join(LAMBADA_KEYS[:-2])}, "
                          f"out, tools.lambada's input and init_from, and the model's knobs")
    args = {k: given.raw.get(k, v) for k, v in given.items() if k not in ('out', 'task')}
    if args.get('sweep'):   # eval's KNOB=A..B as tools.lambada's KNOB=a,b,c
        knob, _, values = str(args['sweep']).partition('=')
        args['sweep'] = f"{knob}={','.join(map(str, parse_values(values)))}"
    results = lambada.main([f'--{k}={v}' for k, v in args.items()])
    source = str(args.get('init_from') or opt['out_dir'])
    folder = opt['out'] or (os.path.join(source, 'eval') if os.path.isdir(source) else None)
    if folder:   # an hf: release has no folder of its own: its results are the printed lines, or go to --out
        os.makedirs(folder, exist_ok=True)
        write_json(os.path.join(folder, 'lambada.json'),
                   {'model': source, 'input': args.get('input', lambada.DEFAULTS['input']), 'results': results})
    return results


# ----------------------------------------------------------------------------- main
def main(argv):
    knobs, opt = {}, DEFAULTS
    try:
        args, runs = split_argv(argv)
        given = parse_args(args)
        opt = {**DEFAULTS, **check(given.pick(DEFAULTS), DEFAULTS)}
        knobs = {k: v for k, v in given.items() if k not in DEFAULTS}
        for k in ('eval_iters', 'batch_size', 'battery_n', 'max_points', 'max_depth'):
            if opt[k] is not None and (not isinstance(opt[k], int) or opt[k] < 1):
                raise ConfigError(f"{k} must be a positive integer, got {opt[k]!r}")
        for k, kind in (('seed', int), ('data_dir', str), ('dataset', str)):
            if opt[k] is not None and not isinstance(opt[k], kind):
                raise ConfigError(f"{k} must be {kind.__name__}, got {opt[k]!r}")
        if opt['out'] and os.path.exists(opt['out']) and not os.path.isdir(opt['out']):
            raise ConfigError(f"--out={opt['out']} is a file; name a folder for the results")
        if opt['compare']:
            runs += [r for r in str(opt['compare']).split(',') if r]
        if opt['task'] not in ('', 'lambada'):
            raise ConfigError(f"task must be lambada (or '' for eval's own scores), got {opt['task']!r}")
        if opt['task']:
            return {'lambada': run_lambada(opt, given, runs)}
        if runs:
            if knobs:
                raise ConfigError(f"unknown key '{next(iter(knobs))}' (--compare takes no model knobs)")
            return {'compare': run_compare(runs, opt)}
        if opt['stream'] and opt['eval_iters'] is not None:
            raise ConfigError("--stream=True scores the whole split; it does not take --eval_iters")
        if opt['split'] not in ('train', 'val', 'test'):
            raise ConfigError(f"split must be train, val or test, got {opt['split']!r}")
        examples_only = opt['battery'] and not any(opt[f] for f in ('sweep', 'extrapolate', 'infill', 'nca_steps', 'gates'))
        if opt['split'] == 'test' and not opt['stream'] and not examples_only:   # the battery reads the split's examples
            raise ConfigError("the test split has no train.py eval set; use --stream=True (or --battery=True alone)")
        torch.manual_seed(0)
        ev = Evaluator(opt, knobs)
        jobs = [(opt['sweep'], run_sweep), (opt['extrapolate'], run_extrapolate), (opt['infill'], run_infill),
                (opt['battery'], run_battery), (opt['nca_steps'], run_nca_steps), (opt['gates'], run_gates)]
        results = {}
        if not any(flag for flag, _ in jobs):
            results['score'] = run_score(ev)
        for flag, job in jobs:
            if flag:
                results[job.__name__[4:]] = job(ev)
        return results
    except (ConfigError, ValueError) as e:   # bad input (a knob value a model rejects, too): one line
        configurator.fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
    except OSError as e:    # a results folder that cannot be written
        configurator.fail(f"{e.filename}: {e.strerror}")
    except KeyboardInterrupt:
        print("interrupted (a sweep keeps the points it measured in its sweep_*.partial.json)", file=sys.stderr)
        sys.exit(130)
    except TypeError as e:  # a knob value of the wrong kind for the model
        if not (knobs or opt['sweep']):
            raise
        configurator.fail(f"the model cannot run with {knobs or opt['sweep']}: TypeError: {str(e).splitlines()[0]}")


if __name__ == '__main__':
    configurator.stop_on_signals()   # SIGTERM, SIGHUP: as Ctrl-C
    main(sys.argv[1:])
