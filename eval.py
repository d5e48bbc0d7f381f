"""
Evaluate a checkpoint (or compare several runs). Every result goes to --out (default
out_dir/eval/) as JSON, and as a PNG where there is something to plot.

    python eval.py --out_dir=out                          # loss, perplexity, bits/token, bits/byte
    python eval.py --out_dir=out --stream=True            # the whole held-out stream, block by block
    python eval.py --out_dir=out --sweep=num_recur=1..24  # Parcae test-time depth + L(T) fit
    python eval.py --out_dir=out --sweep=Ts=1,2,4,6,8     # TextNCA inference-time Ts
    python eval.py --out_dir=out --extrapolate=256,512,1024,2048
    python eval.py --out_dir=out --infill=True --battery=True
    python eval.py --compare out-fon out-tf out-mamba2 --battery    # FON Table 8: fill mode, the controls
    python eval.py --out_dir=out --nca_steps=True --gates=True   # TextNCA Fig. 8 / Fig. 10
    python eval.py --compare out-gpt out-parcae out-fon   # Markdown table + loss curves
    python eval.py --compare out-fon out-tf --extrapolate=256,512,1024,2048   # extrapolation, one figure
    python eval.py --out_dir=out --num_recur=16           # any forward knob, passed to every call

Scoring. Default: train.py's own eval set (batches.get(split, -1 - k), k < eval_iters, with the
checkpoint's seed, batch_size and block_size), so the val loss equals the one train.py logged.
--stream=True: every complete block of block_size + 1 tokens of the split's stream, in order,
the first token of a block context only, the trailing incomplete block dropped and the last short
batch kept (the causal-workspace paper's protocol). Loss is the mean NLL over scored targets; bits
per token = loss / ln 2; bits per byte = total NLL / ln 2 / the UTF-8 bytes the scored targets
stand for (byte tokenizer: 1 per symbol, the row separator included, as the workspace paper
counts it; char: the character's bytes; gpt2: the token's bytes).

Analyses (each one figure): --sweep KNOB=V1,V2,... or KNOB=A..B for any knob of forward; for
num_recur (or with --fit=True) the fit L(T) = L_inf + Z exp(-z T) (Parcae section 5.3: least
squares, a grid over z with (L_inf, Z) solved linearly for each z, then a golden-section refine).
--extrapolate: loss at each eval length on non-overlapping val blocks (same targets budget per
length); a model with learned positions cannot go past its table: NaN with a note. --infill:
holes made with dataloader.make_holes on the val eval set (every sequence holed, the
checkpoint's hole_stride and p_hole); full-vocabulary argmax hit rate at the holes (holes= passed
when forward takes it), against two no-hole readings of the token p: the same model's argmax at
p-1 on the un-holed input (it reads the other holes' true tokens), and the checkpoint without
hole fine-tuning (--baseline_from, default the run's init_from) at p-1 on the holed input, the
LM prior, the paper's baseline; holes at position 0 are left out of all three. --battery: the
synthetic battery (battery.TASKS: FON's Table 8 six and its five future-dependent tasks), in
fill mode (the answer's tokens set to the MASK id, argmax at each; a GPT also with full attention,
causal=False, the bidirectional non-generative control) and by greedy generation after the
prompt, exact match per task against its chance. With --compare a b c: one table of every run's
fill readings, Table 8's layout (FON, the Transformer causal and bidirectional, Mamba2).
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

import train
from configurator import ConfigError, check, parse_args
from dataloader import make_holes

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
fit = False              # fit L(T) = L_inf + Z exp(-z T) to the sweep (always for num_recur)
extrapolate = None       # 256,512,1024,2048 (lengths), or True for 1, 2, 4, 8 x the training length
infill = False
battery = False
battery_n = 100          # examples per task
baseline_from = ''       # --infill: the checkpoint without hole fine-tuning ('': the run's init_from)
nca_steps = False        # TextNCA: loss after every NCA step (model.step_losses)
gates = False            # TextNCA: mean update/reset gates per step (model.gate_stats)
compare = ''             # run folders (python eval.py --compare out-a out-b ...)
out = ''                 # '': out_dir/eval (compare: the first run's folder/compare)
device = 'auto'
dtype = 'auto'
DEFAULTS = {k: v for k, v in globals().items() if not k.startswith('_') and isinstance(v, (int, float, bool, str, type(None)))}
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


def clean(x):
    """JSON-safe: NaN/inf become null, tensors and numpy numbers plain Python."""
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if isinstance(x, (torch.Tensor, np.ndarray)):
        return clean(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def write_json(path, obj):
    with open(path, 'w') as f:
        json.dump(clean(obj), f, indent=1)
    print(f"wrote {path}")


def axes(title, xlabel, ylabel):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    return fig, ax


def save_figure(fig, ax, path):
    """Saves the figure; returns its number of data series (lines + bar groups)."""
    import matplotlib.pyplot as plt
    n = len(ax.get_lines()) + len(ax.containers)
    if n > 1:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}")
    return n


def parse_values(text):
    """'1,2,4' -> [1, 2, 4]; '1..24' -> 1..24 inclusive; words stay strings ('AR,PC')."""
    import ast
    text = str(text)
    if '..' in text and ',' not in text:
        a, b = text.split('..')
        try:
            return list(range(int(a), int(b) + 1))
        except ValueError:
            raise ConfigError(f"expected a range A..B of integers, got {text!r}")
    vals = []
    for v in text.strip('()[] ').split(','):
        v = v.strip()
        if not v:
            continue
        try:
            vals.append(ast.literal_eval(v))
        except (ValueError, SyntaxError):
            vals.append(v)
    if not vals:
        raise ConfigError(f"no values in {text!r}")
    return vals


# ----------------------------------------------------------------------------- the L(T) fit
def fit_exp_decay(T, L):
    """Least-squares fit of L(T) = L_inf + Z exp(-z T) (Parcae section 5.3). For a fixed z the
    model is linear in (L_inf, Z): solve that exactly on a log grid of z, then refine z by
    golden-section search between the best grid point's neighbours."""
    T, L = np.asarray(T, dtype=np.float64), np.asarray(L, dtype=np.float64)
    ok = np.isfinite(L)
    T, L = T[ok], L[ok]
    if len(T) < 3:
        raise ValueError("the fit needs at least 3 finite points")

    def solve(z):
        A = np.stack([np.ones_like(T), np.exp(-z * T)], 1)
        coef, *_ = np.linalg.lstsq(A, L, rcond=None)
        return float(((A @ coef - L) ** 2).sum()), coef

    grid = np.logspace(-4, 2, 601) / max(T.max() - T.min(), 1.0) * 10
    sse = [solve(z)[0] for z in grid]
    i = int(np.argmin(sse))
    a, b = np.log(grid[max(i - 1, 0)]), np.log(grid[min(i + 1, len(grid) - 1)])
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    for _ in range(100):
        if solve(math.exp(c))[0] < solve(math.exp(d))[0]:
            b, d = d, c
            c = b - g * (b - a)
        else:
            a, c = c, d
            d = a + g * (b - a)
    z = math.exp((a + b) / 2)
    err, (L_inf, Z) = solve(z)
    return {'L_inf': float(L_inf), 'Z': float(Z), 'z': z, 'rmse': math.sqrt(err / len(T)), 'points': int(len(T))}


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
        from prepare_data import get_tokenizer
        _, decode = get_tokenizer(meta)
        for i in range(min(meta['vocab_size'], vocab_size)):
            table[i] = len(decode([i]).encode('utf-8'))
    elif kind == 'gpt2':
        try:
            from prepare_data import gpt2_encoding
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
    data = np.memmap(path, dtype=np.uint16, mode='r')
    L = block_size + 1
    n = len(data) // L
    for b0 in range(0, n, batch_size):
        b1 = min(n, b0 + batch_size)
        xy = torch.from_numpy(data[b0 * L:b1 * L].astype(np.int64)).view(b1 - b0, L)
        yield xy[:, :-1].contiguous(), xy[:, 1:].contiguous()


class Evaluator:
    """A loaded checkpoint with its data, device and knobs."""

    def __init__(self, cfg, knobs):
        self.opt = cfg
        self.dev, self.ptdtype, self.ctx = train.resolve_device(cfg['device'], cfg['dtype'])
        self.model, ckpt = train.load_checkpoint(cfg['out_dir'], self.dev)
        self.model.eval()
        self.name = ckpt['model_name']
        self.knob_names = [k for k in train.knob_names(self.model) if k != 'holes']
        bad = [k for k in knobs if k not in self.knob_names]
        if bad:
            known = sorted(set(DEFAULTS) | set(self.knob_names))
            raise ConfigError(f"unknown key '{bad[0]}': not an eval.py key nor a knob of {self.name}'s forward "
                              f"(knobs: {', '.join(self.knob_names) or 'none'}; keys: {', '.join(known)})")
        self.knobs = knobs
        self.tcfg = dict(ckpt['config'])   # the full training config
        self.iter_num = ckpt.get('iter_num')
        for k in ('batch_size', 'seed', 'data_dir', 'dataset', 'eval_iters'):
            if cfg[k] is not None:
                self.tcfg[k] = cfg[k]
        self.meta = train.read_meta(self.tcfg) or ckpt.get('meta')
        if self.meta is None:
            raise ConfigError(f"{self.tcfg['data_dir']}/{self.tcfg['dataset']}/meta.json not found: eval needs the "
                              f"checkpoint's data (set --data_dir / --dataset)")
        self.vocab = self.model.config.vocab_size
        path = os.path.join(self.tcfg['data_dir'], self.tcfg['dataset'], f"{cfg['split']}.bin")
        if os.path.isfile(path):   # a missing one is named where it is read
            train.check_tokens(path, 1, self.vocab)
        mid = self.tcfg.get('mask_id')
        self.mask_id = mid if mid is not None else self.meta.get('mask_id', self.meta['vocab_size'])
        self.bytes = token_bytes(self.meta, self.vocab)
        self.accepts_holes = 'holes' in train.knob_names(self.model)

    def batches(self, split):
        cfg = dict(self.tcfg)
        if split != 'train':
            cfg['p_synth'] = 0.0   # val batches never mix in synth data; do not require its files
        return train.Batches(cfg, 0, 1, self.mask_id)

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
            for x, y in stream_batches(path, T, bs):
                if max_targets is not None and seen >= max_targets:
                    break
                if max_targets is not None and seen + y.numel() > max_targets:
                    keep = max(1, (max_targets - seen) // T)
                    x, y = x[:keep], y[:keep]
                seen += y.numel()
                yield x, y, None
            return
        b = self.batches(split)
        for k in range(self.tcfg['eval_iters']):
            yield b.get(split, -1 - k)

    @torch.no_grad()
    def score(self, split, block_size=None, max_targets=None, **extra):
        """Mean NLL (the model's own loss, weighted by scored targets), perplexity, bits."""
        nll, n, nbytes = 0.0, 0, 0
        for x, y, holes in self.data_batches(split, block_size, max_targets):
            kw = dict(extra)
            if holes is not None and self.accepts_holes:
                kw['holes'] = holes.to(self.dev)
            _, loss = self.forward(x, y, **kw)
            k = int((y != -1).sum())
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
        d = self.opt['out'] or os.path.join(self.opt['out_dir'], 'eval')
        os.makedirs(d, exist_ok=True)
        return os.path.join(d, name)

    def protocol(self):
        if self.opt['stream']:
            return f"stream (every complete block of {self.tcfg['block_size'] + 1})"
        return f"train.py eval set ({self.tcfg['eval_iters']} x {self.tcfg['batch_size']} x {self.tcfg['block_size']})"


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


def run_sweep(ev):
    if '=' not in ev.opt['sweep']:
        raise ConfigError(f"--sweep expects KNOB=V1,V2,..., got {ev.opt['sweep']!r}")
    knob, vals = ev.opt['sweep'].split('=', 1)
    if knob not in ev.knob_names:
        raise ConfigError(f"{ev.name} has no knob '{knob}' (its forward takes: {', '.join(ev.knob_names) or 'none'})")
    values = parse_values(vals)
    split, rows = ev.opt['split'], []
    for v in values:
        r = ev.score(split, **{knob: v})
        rows.append(r)
        print(f"{knob}={v}: loss {r['loss']:.4f}, perplexity {r['perplexity']:.3f}")
    res = {'model': ev.name, 'split': split, 'protocol': ev.protocol(), 'knob': knob, 'values': values,
           **{k: [r[k] for r in rows] for k in ('loss', 'perplexity', 'bits_per_token', 'bits_per_byte', 'tokens')}}
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if numeric and (knob == 'num_recur' or ev.opt['fit']):
        try:
            f = fit_exp_decay(values, res['loss'])
            res['fit'] = f
            print(f"fit L(T) = L_inf + Z exp(-z T): L_inf {f['L_inf']:.4f}, Z {f['Z']:.4f}, z {f['z']:.4f}, "
                  f"rmse {f['rmse']:.2e} ({f['points']} points)")
        except ValueError as e:
            print(f"no fit: {e}")
    fig, ax = axes(f"{ev.name}: {split} loss vs {knob}", knob, f'{split} loss (nats/token)')
    if numeric:
        ax.plot(values, res['loss'], 'o-', label='measured')
    else:
        ax.plot(range(len(values)), res['loss'], 'o-', label='measured')
        ax.set_xticks(range(len(values)), [str(v) for v in values])
    if 'fit' in res:
        f = res['fit']
        t = np.linspace(min(values), max(values), 200)
        ax.plot(t, f['L_inf'] + f['Z'] * np.exp(-f['z'] * t), '--',
                label=f"fit {f['L_inf']:.3f} + {f['Z']:.3f} exp(-{f['z']:.3f} {knob})")
    res['series'] = save_figure(fig, ax, ev.outpath(f'sweep_{knob}.png'))
    write_json(ev.outpath(f'sweep_{knob}.json'), res)
    return res


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
    print(f"| run | eval length | loss | perplexity | vs train length | tokens | note |\n|---|---|---|---|---|---|---|")
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


def pretrained_model(ev):
    """(model, note): the checkpoint without hole fine-tuning, the paper's no-hole baseline:
    --baseline_from, else the run's init_from when it names a folder with a ckpt.pt."""
    path = ev.opt['baseline_from'] or ev.tcfg.get('init_from', '')
    if path in ('', 'scratch', 'resume'):
        return None, 'the run was not fine-tuned from another checkpoint (set --baseline_from)'
    if not os.path.isfile(os.path.join(path, 'ckpt.pt')):
        return None, f'no checkpoint at {path} (set --baseline_from)'
    model, _ = train.load_checkpoint(path, ev.dev)
    if ev.mask_id >= model.config.vocab_size:
        return None, f'the model at {path} has no row for the MASK id {ev.mask_id}'
    return model.eval(), path


@torch.no_grad()
def run_infill(ev):
    if ev.mask_id >= ev.vocab:
        raise ConfigError(f"the model has {ev.vocab} embedding rows, no row for the MASK id {ev.mask_id}: "
                          f"hole fine-tune it (train.py --p_fill=0.5) or train with a larger vocab_size")
    cfg = {**ev.tcfg, 'p_fill': 1.0}
    b = ev.batches(ev.opt['split'])
    pre, pre_note = pretrained_model(ev)
    hit = unholed = prior = n = 0
    hole_nll = 0.0
    for k in range(ev.tcfg['eval_iters']):
        x, y, _ = b.get(ev.opt['split'], -1 - k)
        g = b.generator('infill', k)
        _, _, holes = make_holes(x, y, cfg, ev.mask_id, g)
        holes[:, 0] = False    # no p-1 to compare with at position 0
        xh = x.masked_fill(holes, ev.mask_id)
        if not holes.any():
            continue
        logits, _ = ev.forward(xh, holes=holes.to(ev.dev))
        logits = logits.float().cpu()
        hit += int((logits[holes].argmax(-1) == x[holes]).sum())
        hole_nll += F.cross_entropy(logits[holes], x[holes], reduction='sum').item()
        prev = torch.roll(holes, -1, dims=1)     # p-1 for every hole p
        clean_logits, _ = ev.forward(x)
        unholed += int((clean_logits.float().cpu()[prev].argmax(-1) == x[holes]).sum())
        if pre is not None:
            with ev.ctx:
                pre_logits, _ = pre(xh.to(ev.dev), **{k: v for k, v in ev.knobs.items() if k != 'holes'})
            prior += int((pre_logits.float().cpu()[prev].argmax(-1) == x[holes]).sum())
        n += int(holes.sum())
    if n == 0:
        raise ConfigError("no holes were drawn; raise --eval_iters")
    res = {'model': ev.name, 'holes': n, 'infill_acc': hit / n, 'hole_loss': hole_nll / n,
           'unholed_prefix_acc': unholed / n, 'pretrained_prefix_acc': prior / n if pre is not None else None,
           'pretrained': pre_note, 'holes_passed': ev.accepts_holes,
           'hole_stride': ev.tcfg['hole_stride'], 'p_hole': ev.tcfg['p_hole'],
           'protocol': 'make_holes on the val eval set, every sequence holed; infill_acc: argmax at the hole; '
                       'unholed_prefix_acc: the same model, argmax at p-1 on the un-holed input (it reads the '
                       'other holes\' true tokens); pretrained_prefix_acc: the checkpoint without hole '
                       'fine-tuning, argmax at p-1 on the holed input (the LM prior, the paper\'s no-hole baseline)'}
    pre_txt = f"{100 * res['pretrained_prefix_acc']:.2f}%" if pre is not None else f"n/a ({pre_note})"
    print(f"infill: accuracy at {n} holes {100 * res['infill_acc']:.2f}% (hole loss {res['hole_loss']:.4f}); "
          f"same model from the un-holed prefix {100 * res['unholed_prefix_acc']:.2f}%; "
          f"without hole fine-tuning, from the holed prefix {pre_txt}")
    fig, ax = axes(f"{ev.name}: infill accuracy at holes", 'prediction', 'argmax accuracy (%)')
    names = ['fill at hole', 'un-holed prefix\n(same model)', 'holed prefix\n(no hole fine-tuning)']
    ax.bar(names, [100 * res['infill_acc'], 100 * res['unholed_prefix_acc'],
                   100 * res['pretrained_prefix_acc'] if pre is not None else 0], color=['C0', 'C7', 'C1'])
    ax.set_ylim(0, 100)
    res['series'] = save_figure(fig, ax, ev.outpath('infill.png'))
    write_json(ev.outpath('infill.json'), res)
    return res


def battery_examples(ev, n):
    """(meta, {task: [(prompt, answer, suffix)]}): the synthetic dataset's own val examples when
    the checkpoint was trained on it (or mixed it in with p_synth), else fresh ones from the val seed."""
    from battery import TASKS, VAL_SEED_OFFSET, encode_example, synthetic_examples, synthetic_split
    from prepare_data import get_tokenizer
    meta, name = ev.meta, ev.tcfg['dataset']
    if ev.tcfg.get('p_synth', 0) > 0:
        name = ev.tcfg['synth_dataset']
        meta = train.read_meta({'data_dir': ev.tcfg['data_dir'], 'dataset': name}) or meta
    if 'tasks' in meta and 'n_train' in meta:
        val = synthetic_split(meta['seed'], meta['n_train'], meta['n_val'])['val']
        path = os.path.join(ev.tcfg['data_dir'], name, 'val.bin')
        first = encode_example(*val[0][1:3], get_tokenizer(meta)[0], suffix=val[0][3])[0]
        if meta['tasks'] != list(TASKS) or (os.path.isfile(path) and np.fromfile(
                path, dtype=np.uint16, count=len(first)).tolist() != first):
            raise ConfigError(f"the synthetic data in {os.path.dirname(path)} was prepared with another battery "
                              f"than today's ({', '.join(TASKS)}): prepare it again (python prepare_data.py synthetic)")
        out = {t: [] for t in TASKS}
        for t, *ex in val:
            if len(out[t]) < n:
                out[t].append(tuple(ex))
        return meta, out
    return meta, {t: synthetic_examples(t, n, 1337 + VAL_SEED_OFFSET) for t in TASKS}


def battery_readings(ev):
    """The ways this checkpoint answers the battery: fill (the answer's tokens at MASK, argmax at
    each; FON through its holes, a causal model at the MASK positions), for a model with a causal
    knob (GPT) also fill with full attention, and generate (greedy, after the prompt only)."""
    modes = ['fill']
    if 'causal' in ev.knob_names:
        modes.append('fill_bidirectional')
    return modes + ['generate']


@torch.no_grad()
def battery_scores(ev):
    """{task: {n, chance, future, <reading>: exact-match rate}} over the battery's val examples."""
    from battery import CHANCE, FUTURE, encode_example
    from prepare_data import get_tokenizer
    meta, tasks = battery_examples(ev, ev.opt['battery_n'])
    encode, _ = get_tokenizer(meta)
    mask = meta.get('mask_id', ev.mask_id)
    readings = battery_readings(ev)
    rows = {}
    for task, exs in tasks.items():
        enc = []
        for p, a, sfx in exs:
            try:
                ids, pos = encode_example(p, a, encode, suffix=sfx)
            except ValueError as e:
                raise ConfigError(f"battery task {task}: {str(e).splitlines()[0]}")
            if len(ids) <= ev.model.config.block_size:
                enc.append((ids, pos))
        row = {'n': len(enc), 'chance': CHANCE[task], 'future': task in FUTURE}
        right = dict.fromkeys(readings, 0)
        groups = {}
        for ids, pos in enc:        # generation: batch examples whose prompts have the same length
            groups.setdefault(pos[0], []).append((ids, pos))
        for start, grp in groups.items():
            x = torch.tensor([ids[:start] for ids, _ in grp])
            want = [ids[pos[0]:pos[-1] + 1] for ids, pos in grp]
            for _ in range(max(len(w) for w in want)):
                logits, _ = ev.forward(x)
                x = torch.cat([x, logits[:, -1].float().argmax(-1, keepdim=True).cpu()], 1)
            right['generate'] += sum(x[i, start:start + len(w)].tolist() == w for i, w in enumerate(want))
        by_len = {}
        for ids, pos in enc:        # fill: one forward per length
            by_len.setdefault(len(ids), []).append((ids, pos))
        for grp in by_len.values() if mask < ev.vocab else []:
            x = torch.tensor([ids for ids, _ in grp])
            holes = torch.zeros_like(x, dtype=torch.bool)
            for i, (_, pos) in enumerate(grp):
                holes[i, pos] = True
            xm = x.masked_fill(holes, mask)
            for r in readings[:-1]:
                extra = {'causal': False} if r == 'fill_bidirectional' else {}
                logits, _ = ev.forward(xm, holes=holes.to(ev.dev), **extra)
                pred = logits.float().argmax(-1).cpu()
                right[r] += sum(bool((pred[i][holes[i]] == x[i][holes[i]]).all()) for i in range(len(grp)))
        for r in readings:   # NaN: no MASK row to fill with, or no example fits block_size
            ok = (r == 'generate' or mask < ev.vocab) and enc
            row[r] = right[r] / len(enc) if ok else float('nan')
        rows[task] = row
    return rows, mask


def battery_table(columns, rows, chance):
    """Markdown: one row per task (and the means over Table 8's six and the future-dependent
    five, over the tasks that have a value), one column per (label, reading)."""
    from battery import FUTURE
    head = '| task | chance | ' + ' | '.join(label for label, _ in columns) + ' |'
    lines = [head, '|' + '---|' * (len(columns) + 2)]
    groups = [('Table 8 six, mean', [t for t in chance if t not in FUTURE]),
              ('future-dependent five, mean', [t for t in chance if t in FUTURE])]
    for t in chance:
        name = f'{t} (future)' if t in FUTURE else t
        lines.append(f'| {name} | {chance[t]:.3f} | ' + ' | '.join(f'{rows[t][k]:.3f}' for _, k in columns) + ' |')
    for name, ts in groups:
        if ts:
            mean = lambda k: float(np.nanmean([rows[t][k] for t in ts])) if any(
                math.isfinite(rows[t][k]) for t in ts) else float('nan')
            lines.append(f'| {name} | {sum(chance[t] for t in ts) / len(ts):.3f} | '
                         + ' | '.join(f'{mean(k):.3f}' for _, k in columns) + ' |')
    return '\n'.join(lines)


def plot_battery(title, columns, rows, path):
    names = list(rows)
    fig, ax = axes(title, 'task', 'exact match (%)')
    w = 0.8 / len(columns)
    for j, (label, key) in enumerate(columns):
        ax.bar(np.arange(len(names)) + (j - (len(columns) - 1) / 2) * w,
               [100 * np.nan_to_num(rows[t][key]) for t in names], w, label=label)
    ax.plot(np.arange(len(names)), [100 * rows[t]['chance'] for t in names], 'k_', ms=14, label='chance')
    ax.set_xticks(range(len(names)), names, rotation=45, fontsize=8)
    ax.set_ylim(0, 100)
    return save_figure(fig, ax, path)


LABELS = {'fill': 'fill (answer at MASK)', 'fill_bidirectional': 'fill, bidirectional attention',
          'generate': 'generate after the prompt'}


def run_battery(ev):
    rows, mask = battery_scores(ev)
    readings = battery_readings(ev)
    columns = [(LABELS[r], r) for r in readings]
    print(battery_table(columns, {t: {k: r[k] for k in readings} for t, r in rows.items()},
                        {t: r['chance'] for t, r in rows.items()}))
    res = {'model': ev.name, 'tasks': rows, 'mask_id': mask, 'readings': readings,
           'protocol': 'fill: the answer\'s tokens set to the MASK id (FON: passed as holes), argmax at each '
                       'equals the answer; fill_bidirectional: the same with full attention (causal=False); '
                       'generate: greedy generation after the prompt (the suffix unseen) equals the answer'}
    res['series'] = plot_battery(f"{ev.name}: synthetic battery", columns, rows, ev.outpath('battery.png'))
    write_json(ev.outpath('battery.json'), res)
    return res


def compare_battery(runs, opt, d):
    """Table 8's layout: every run's fill reading (a Transformer's causal and bidirectional ones)."""
    columns, rows, chance, per_run = [], {}, {}, {}
    for r in runs:
        ev = Evaluator({**opt, 'out_dir': r}, {})
        scores, _ = battery_scores(ev)
        base = os.path.basename(os.path.normpath(r))
        per_run[r] = scores
        for reading in battery_readings(ev)[:-1]:
            kind = {'fill': 'causal' if 'causal' in ev.knob_names else 'fill',
                    'fill_bidirectional': 'bidirectional'}[reading]
            key = f'{base}/{reading}'
            columns.append((f'{base} ({ev.name}, {kind})', key))
            for t, row in scores.items():
                rows.setdefault(t, {'chance': row['chance']})[key] = row[reading]
                chance[t] = row['chance']
    table = battery_table(columns, rows, chance)
    print(table)
    res = {'runs': per_run, 'table': table, 'columns': columns}
    res['series'] = plot_battery('synthetic battery, fill mode', columns, rows, os.path.join(d, 'battery.png'))
    write_json(os.path.join(d, 'battery.json'), res)
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
        cfg = train.read_checkpoint(path)['config']
    else:
        raise ConfigError(f"{path} is not a run folder (no config.json or ckpt.pt)")
    cfg = {k: tuple(v) if isinstance(v, list) else v for k, v in cfg.items()}
    with torch.device('meta'):
        m = train.build_model(cfg['model'], cfg)
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
    return {'run': path, 'model': cfg['model'], 'params': m.num_params(),
            'flops_per_token': m.flops_per_token(cfg['block_size']),
            'tokens': last.get('tokens', last.get('iter', 0) * tpi), 'iter': last.get('iter'),
            'val_loss': last.get('val_loss', float('nan')),
            'perplexity': math.exp(last['val_loss']) if 'val_loss' in last else float('nan'),
            'train_curve': [(r['iter'] * tpi, r['loss']) for r in trains],
            'val_curve': [(r.get('tokens', r['iter'] * tpi), r['val_loss']) for r in evals]}


def run_compare(runs, opt):
    rows = [read_run(r) for r in runs]
    print("| run | model | parameters | training tokens | FLOPs/token | val loss | perplexity |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['run']} | {r['model']} | {r['params'] / 1e6:.2f}M | {r['tokens']:,} | {r['flops_per_token'] / 1e6:.1f}M "
              f"| {r['val_loss']:.4f} | {r['perplexity']:.2f} |")
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
        res['battery'] = compare_battery(runs, opt, d)
    if opt['extrapolate']:   # every run's extrapolation in one table and one figure
        ext = {'runs': [extrapolation(Evaluator({**opt, 'out_dir': r}, {})) for r in runs]}
        ext['series'] = plot_extrapolation(ext['runs'], os.path.join(d, 'extrapolate.png'))
        write_json(os.path.join(d, 'extrapolate.json'), ext)
        res['extrapolate'] = ext
    return res


# ----------------------------------------------------------------------------- main
def main(argv):
    knobs, opt = {}, DEFAULTS
    try:
        args, runs = split_argv(argv)
        given = parse_args(args)
        opt = {**DEFAULTS, **check({k: v for k, v in given.items() if k in DEFAULTS}, DEFAULTS)}
        knobs = {k: v for k, v in given.items() if k not in DEFAULTS}
        for k in ('eval_iters', 'batch_size', 'battery_n'):
            if opt[k] is not None and (not isinstance(opt[k], int) or opt[k] < 1):
                raise ConfigError(f"{k} must be a positive integer, got {opt[k]!r}")
        for k, kind in (('seed', int), ('data_dir', str), ('dataset', str)):
            if opt[k] is not None and not isinstance(opt[k], kind):
                raise ConfigError(f"{k} must be {kind.__name__}, got {opt[k]!r}")
        if opt['out'] and os.path.exists(opt['out']) and not os.path.isdir(opt['out']):
            raise ConfigError(f"--out={opt['out']} is a file; name a folder for the results")
        if opt['compare']:
            runs += [r for r in str(opt['compare']).split(',') if r]
        if runs:
            if knobs:
                raise ConfigError(f"unknown key '{next(iter(knobs))}' (--compare takes no model knobs)")
            return {'compare': run_compare(runs, opt)}
        if opt['stream'] and opt['eval_iters'] is not None:
            raise ConfigError("--stream=True scores the whole split; it does not take --eval_iters")
        if opt['split'] not in ('train', 'val', 'test'):
            raise ConfigError(f"split must be train, val or test, got {opt['split']!r}")
        if opt['split'] == 'test' and not opt['stream']:
            raise ConfigError("the test split has no train.py eval set; use --stream=True")
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
        train.fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
    except OSError as e:    # a results folder that cannot be written
        train.fail(f"{e.filename}: {e.strerror}")
    except TypeError as e:  # a knob value of the wrong kind for the model
        if not (knobs or opt['sweep']):
            raise
        train.fail(f"the model cannot run with {knobs or opt['sweep']}: TypeError: {str(e).splitlines()[0]}")


if __name__ == '__main__':
    main(sys.argv[1:])
