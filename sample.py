"""
Generate or infill text with a trained model.

    python sample.py --out_dir=out --start="ROMEO:" --num_samples=3 --max_new_tokens=200
    python sample.py --out_dir=out-parcae_140m --start=FILE:prompt.txt --num_recur=16   # a model knob
    python sample.py --out_dir=out --infill=True --start="The [MASK] sat on the mat."

Any --key=value that is not a key below is a knob of the model's forward (Parcae num_recur,
TextNCA Ts, ...). Models with an incremental decode path (KV cache, FON's and Mamba2's O(1)
recurrent state) decode every token through it, at any length; a model with a learned position
table (GPT pos='learned', TextNCA) crops to the table's rows past it and says so once. Infilling: a model whose forward takes `holes` (FON) fills every MASK
marker through its revision organ, one token per marker; any other (causal) model fills the span
between prefix and suffix by ranking candidate spans on the likelihood of prefix + span + suffix
(candidates from --candidates="a|b|c", else --num_candidates spans sampled after the prefix).

It runs on the device the run trained on where this machine has it (else cuda > mps > cpu), under
bfloat16 autocast on a GPU that supports it (--dtype, --device, --compile=True to choose).
"""
import os
import sys

import torch
import torch.nn.functional as F

import configurator
from configurator import ConfigError, check, parse_args
from prepare_data import DataError, get_tokenizer, tokenizer_problem
from models import DEPTH_KNOBS, check_device, check_knobs, resolve_device
from run_folder import load_checkpoint

DEFAULTS = dict(
    out_dir='out',
    start='\n',                # text, or FILE:path (FILE:/dev/stdin reads standard input)
    num_samples=1,
    max_new_tokens=200,
    temperature=0.8,           # 0: greedy
    top_k=200,                 # 0: no top-k
    seed=1337,
    device=None,               # None: the run's own device where this machine has it, else 'auto' (cuda > mps >
                               # cpu) | 'cpu' | 'cuda' | 'cuda:N' | 'mps'
    dtype='auto',              # 'auto' (bfloat16 on a GPU that supports it, else float32) | 'float32' | 'bfloat16' | 'float16'
    compile=False,             # torch.compile the model's forward (the decode_step path stays eager)
    infill=False,
    mask='[MASK]',             # the infill marker in --start
    candidates='',             # causal infill: '|'-separated candidate spans
    num_candidates=16,         # causal infill: spans sampled when no candidates are given
    span_tokens=8,             # causal infill: length of a sampled span
    max_depth=1000,            # a loop depth (num_recur, Ts) above this stops with a line: raise it to run deeper
)


def sample_logits(logits, temperature, top_k, g):
    if temperature <= 0:
        return logits.argmax(-1)
    logits = logits.float() / temperature
    if top_k:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits = logits.masked_fill(logits < v[:, [-1]], float('-inf'))
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=g).squeeze(-1)


def decode_knobs(model, knobs):
    """The knobs the model's decode path takes (its class's decode_knobs; forward's others, such as
    FON's holes, have no meaning there)."""
    return {k: v for k, v in knobs.items() if k in getattr(model, 'decode_knobs', ())}


def position_rows(model):
    """Rows of the model's learned position table (a module named wpe), None when it has none."""
    for name, m in model.named_modules():
        if name.rsplit('.', 1)[-1] == 'wpe' and isinstance(m, torch.nn.Embedding):
            return m.num_embeddings
    return None


@torch.no_grad()
def generate(model, idx, n, temperature, top_k, g, knobs):
    """idx (B, T) -> (B, T + n). Every token goes through decode_step (FON's and Mamba2's O(1)
    state, KV caches) whenever the model has one and no learned position table to outgrow; a
    model with a table decodes while the text fits it, and past it says once that it crops to the
    table's last rows, one full forward per token."""
    if knobs.get('causal') is False:
        raise ConfigError("causal=False is a non-generative (bidirectional) reading; generation is causal")
    rows = position_rows(model)
    if hasattr(model, 'decode_step') and (rows is None or idx.size(1) + n <= rows):
        step_knobs = decode_knobs(model, knobs)
        state = model.decode_init(idx.size(0), idx.device, **step_knobs)
        for t in range(idx.size(1)):
            logits, state = model.decode_step(idx[:, t], state, **step_knobs)
        out = [idx]
        for i in range(n):
            nxt = sample_logits(logits, temperature, top_k, g)
            out.append(nxt[:, None])
            if i < n - 1:
                logits, state = model.decode_step(nxt, state, **step_knobs)
        return torch.cat(out, dim=1)
    crop = rows or model.config.block_size
    if idx.size(1) + n > crop:
        why = f"its learned position table has {rows} rows" if rows else "it has no incremental decode path"
        print(f"note: {type(model).__name__} sees only the last {crop} tokens of a longer text ({why}); "
              f"one full forward per token", file=sys.stderr)
    for _ in range(n):
        logits, _ = model(idx[:, -crop:], **knobs)
        idx = torch.cat([idx, sample_logits(logits[:, -1], temperature, top_k, g)[:, None]], dim=1)
    return idx


@torch.no_grad()
def sequence_logprob(model, ids, score_from, knobs):
    """Sum of log p(ids[t] | ids[<t]) for t >= score_from, per row of ids (B, T)."""
    logits, _ = model(ids[:, :-1], **knobs)
    lp = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    return lp[:, score_from - 1:].sum(-1)


def infill_causal(model, encode, decode, prefix, suffix, args, g, knobs, dev):
    """Rank candidate spans by log p(prefix + span + suffix): the best span is the one that makes
    the whole text most likely, so the suffix is taken into account although the model is causal."""
    pre = encode(prefix) or encode('\n')
    if args['candidates']:
        spans = [encode(c) for c in args['candidates'].split('|')]
    else:
        idx = torch.tensor([pre] * args['num_candidates'], device=dev)
        gen = generate(model, idx, args['span_tokens'], args['temperature'] or 1.0, args['top_k'], g, knobs)
        spans = [row[len(pre):].tolist() for row in gen]
    suf = encode(suffix)
    scored = []
    for span in spans:
        check_length(model, len(pre + span + suf) - 1, "the infill text (prefix + span + suffix)")
        ids = torch.tensor([pre + span + suf], device=dev)
        scored.append((sequence_logprob(model, ids, len(pre), knobs).item(), span))
    scored.sort(key=lambda s: -s[0])
    return [(lp, decode(span)) for lp, span in scored]


def infill_holes(model, encode, decode, parts, mask_id, args, g, knobs, dev):
    """One token per marker, predicted at the hole from both sides (FON's revision organ)."""
    ids, holes = [], []
    for i, part in enumerate(parts):
        toks = encode(part)
        ids += toks
        holes += [False] * len(toks)
        if i < len(parts) - 1:
            ids.append(mask_id)
            holes.append(True)
    check_length(model, len(ids), "the infill text")
    idx = torch.tensor([ids], device=dev)
    hole_mask = torch.tensor([holes], device=dev)
    logits, _ = model(idx, holes=hole_mask, **knobs)
    fill = sample_logits(logits[0][hole_mask[0]], args['temperature'], args['top_k'], g)
    idx[hole_mask] = fill
    return decode(idx[0].tolist())


def check_ids(ids, model, meta, decode):
    """Prompt ids the model has embeddings for: the battery's MASK token ('_') is outside a
    causal model's vocabulary."""
    vocab = model.config.vocab_size
    bad = [i for i in ids if i >= vocab]
    if bad:
        tok = meta.get('mask_token') if bad[0] == meta.get('mask_id') else None
        what = f"the MASK token {tok!r} (id {bad[0]})" if tok else f"token id {bad[0]}"
        raise ConfigError(f"the prompt holds {what}, outside this {type(model).__name__}'s vocabulary of {vocab}: "
                          f"drop it" + (", or mark a hole with --infill=True --mask=..." if tok else ""))
    return ids


def check_length(model, n, what):
    """A text of n tokens fits a learned position table (the only length limit of a full forward)."""
    rows = position_rows(model)
    if rows is not None and n > rows:
        raise ConfigError(f"{what} is {n} tokens, longer than this {type(model).__name__}'s learned position table "
                          f"({rows} rows): shorten it")


def check_depth(knobs, max_depth):
    """A loop depth far beyond any trained one runs for hours without a word: stop and say how to ask for it."""
    for k in DEPTH_KNOBS:
        if isinstance(knobs.get(k), int) and knobs[k] > max_depth:
            raise ConfigError(f"{k}={knobs[k]} runs the loop {knobs[k]} times per token, above max_depth={max_depth}: "
                              f"pass --max_depth={knobs[k]} to run it anyway")


def check_args(args):
    """Option values sample.py cannot use stop here with what is accepted."""
    for k in ('num_samples', 'num_candidates', 'span_tokens'):
        if args[k] < 1:
            raise ConfigError(f"{k} must be >= 1, got {args[k]!r}")
    for k in ('max_new_tokens', 'temperature', 'top_k'):
        if args[k] < 0:
            raise ConfigError(f"{k} must be >= 0, got {args[k]!r}")
    if not args['mask']:
        raise ConfigError("mask must be a non-empty marker such as [MASK]")
    if args['dtype'] not in ('auto', 'float32', 'bfloat16', 'float16'):
        raise ConfigError(f"dtype must be auto, float32, bfloat16 or float16, got {args['dtype']!r}")
    if args['device'] is not None and not isinstance(args['device'], str):
        raise ConfigError(f"device must be auto, cpu, cuda, cuda:N or mps, got {args['device']!r}")
    if args['device'] not in (None, 'auto'):
        check_device(args['device'])
    if args['max_depth'] < 1:
        raise ConfigError(f"max_depth must be >= 1, got {args['max_depth']!r}")


def best_device():
    """cuda > mps > cpu, as this machine has them."""
    if torch.cuda.is_available():
        return 'cuda'
    return 'mps' if torch.backends.mps.is_available() else 'cpu'


def sample_device(device, trained):
    """(device, note): the one asked for; else the one the run trained on (its config's device)
    where this machine has it; else the best one here, with a note saying so when the run's is missing."""
    if device not in (None, 'auto'):
        return device, None
    if device is None and trained not in (None, 'auto'):
        try:
            check_device(trained)
            return trained, None
        except ConfigError:
            return best_device(), f"note: the run trained on {trained}, which this machine lacks: sampling on {best_device()}"
    return best_device(), None


def load_model(args):
    """The run's model, moved to the device it samples on (args['device'] becomes that device), its
    checkpoint, and the autocast context of args['dtype'] there."""
    model, ckpt = load_checkpoint(args['out_dir'], 'cpu')
    args['device'], note = sample_device(args['device'], ckpt['config'].get('device'))
    if note:
        print(note, file=sys.stderr)
    args['device'], _, autocast = resolve_device(args['device'], args['dtype'])
    model.to(args['device'])
    return model, ckpt, autocast


def check_model(model, ckpt, knobs, args):
    """Stops with one line where the knobs are not the model's, a depth is above max_depth, or the
    run is a bidirectional encoder, which sample.py cannot read causally."""
    bad = [k for k in knobs if k not in model.knobs]
    if bad:
        raise ConfigError(f"unknown key(s) {', '.join(bad)}: neither a sample.py key ({', '.join(DEFAULTS)}) "
                          f"nor a knob of the {ckpt['model_name']} model ({', '.join(model.knobs) or 'none'})")
    check_knobs(knobs)
    check_depth(knobs, args['max_depth'])
    if ckpt['config'].get('causal', True) is False:
        raise ConfigError(f"{args['out_dir']} was trained with causal=False, a bidirectional encoder and never a "
                          f"generator, and sample.py reads causally: fill its holes with "
                          f"python -m tools.eval --out_dir={args['out_dir']} --battery=True")


def read_tokenizer(model, ckpt, out_dir):
    """(meta, encode, decode) of the checkpoint's tokenizer; encode stops with one line on text the
    tokenizer cannot encode or ids the model has no row for."""
    meta = ckpt.get('meta')
    if not isinstance(meta, dict) or 'tokenizer' not in meta:
        raise ConfigError(f"the checkpoint in {out_dir} carries no tokenizer (meta['tokenizer']): "
                          f"it was trained on data whose meta.json does not name one")
    if tokenizer_problem(meta):
        raise ConfigError(f"the checkpoint in {out_dir} cannot decode: its meta {tokenizer_problem(meta)}")
    encode_raw, decode = get_tokenizer(meta)

    def encode(text):  # characters outside a char vocabulary: one line, not a traceback
        try:
            ids = encode_raw(text)
        except ValueError as e:
            raise ConfigError(f"the prompt cannot be encoded with the {meta['tokenizer']} tokenizer: {e}")
        return check_ids(ids, model, meta, decode)
    return meta, encode, decode


def read_start(start):
    """The prompt: --start itself, or the text of the file FILE:path names."""
    if start.startswith('FILE:'):
        path = start[5:]
        if not os.path.exists(path):   # a pipe such as /dev/stdin is read as a file
            raise ConfigError(f"prompt file not found: {path}")
        if os.path.isdir(path):
            raise ConfigError(f"prompt file not found: {path} is a folder")
        try:
            start = open(path, encoding='utf-8').read()
        except UnicodeDecodeError as e:
            raise ConfigError(f"prompt file {path} is not UTF-8 text ({e.reason} at byte {e.start})")
    return start


def infill(model, ckpt, meta, encode, decode, start, args, g, knobs):
    """Prints --num_samples infills of the MASK markers in start: through the model's holes where
    its forward takes them (FON), else one span ranked by likelihood."""
    dev = args['device']
    parts = start.split(args['mask'])
    if len(parts) < 2:
        raise ConfigError(f"--infill needs the marker {args['mask']!r} in --start")
    if 'holes' in model.knobs:
        mask_id = ckpt['config'].get('mask_id')
        mask_id = meta.get('mask_id', meta['vocab_size']) if mask_id is None else mask_id
        if mask_id >= model.config.vocab_size:
            raise ConfigError(f"the model has {model.config.vocab_size} embedding rows, no row for the MASK id "
                              f"{mask_id}, and a fine-tune cannot add one: train with holes from the start "
                              f"(train.py --p_fill=0.5 sizes the vocabulary for the MASK id)")
        for _ in range(args['num_samples']):
            print(infill_holes(model, encode, decode, parts, mask_id, args, g, knobs, dev))
            print('---------------')
        return
    if len(parts) > 2:
        raise ConfigError("a causal model fills one span: put exactly one marker in --start")
    for lp, span in infill_causal(model, encode, decode, parts[0], parts[1], args, g, knobs, dev)[:args['num_samples']]:
        print(f"{lp:9.3f}  {parts[0]}{span}{parts[1]}")
        print('---------------')


def main(argv):
    knobs = {}
    try:
        given = parse_args(argv)
        args = {**DEFAULTS, **check(given.pick(DEFAULTS), DEFAULTS)}
        check_args(args)
        model, ckpt, autocast = load_model(args)
        knobs = {k: v for k, v in given.items() if k not in DEFAULTS}
        check_model(model, ckpt, knobs, args)
        meta, encode, decode = read_tokenizer(model, ckpt, args['out_dir'])
        start = read_start(args['start'])
        model.eval()
        if args['compile']:
            model.compile()
        autocast.__enter__()   # every forward and decode step from here on, as nanoGPT's `with ctx:`; the process ends after
        g = torch.Generator(args['device']).manual_seed(args['seed'])
        torch.manual_seed(args['seed'])
        if args['infill']:
            infill(model, ckpt, meta, encode, decode, start, args, g, knobs)
            return
        ids = encode(start)
        if not ids:
            raise ConfigError("--start encodes to no tokens")
        idx = torch.tensor([ids] * args['num_samples'], device=args['device'])
        out = generate(model, idx, args['max_new_tokens'], args['temperature'], args['top_k'], g, knobs)
        for row in out:
            print(decode(row.tolist()))
            print('---------------')
    except (ConfigError, DataError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:   # | head: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except (TypeError, ValueError) as e:   # a knob value the model rejects
        if not knobs:
            raise
        print(f"error: the model cannot run with {', '.join(f'{k}={v!r}' for k, v in knobs.items())}: "
              f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
        sys.exit(2)


if __name__ == '__main__':
    configurator.stop_on_signals()   # SIGTERM, SIGHUP: as Ctrl-C
    main(sys.argv[1:])
