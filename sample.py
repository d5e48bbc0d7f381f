"""
Generate or infill text with a trained model.

    python sample.py --out_dir=out --start="ROMEO:" --num_samples=3 --max_new_tokens=200
    python sample.py --out_dir=out-parcae_140m --start=FILE:prompt.txt --num_recur=16   # a model knob
    python sample.py --out_dir=out --infill=True --start="add 12+34 = [MASK]" --candidates="46|64|4"
    python sample.py --init_from=hf:SandyResearch/parcae-140m --num_recur=8   # the Parcae authors' weights (docs/parcae.md)

Any --key=value that is not a key below is a knob of the model's forward (Parcae num_recur,
TextNCA Ts, ...). Models with an incremental decode path (KV cache, FON's and Mamba2's O(1)
recurrent state) decode every token through it, at any length; a model with a learned position
table (GPT pos='learned', TextNCA) crops to the table's rows past it and says so once. One sample
streams its text as its tokens come; Ctrl-C or SIGTERM prints what was generated so far and exits
130 / 143.

Infilling (docs/sampling.md): --candidates="a|b|c" are ranked, every one printed with the score
that decided, best first. A causal model scores a candidate with the text after the marker, by
mean log-likelihood per character of candidate + that text (a sum would favour the shortest);
FON scores it through its revision organ, the candidate's tokens as holes read from both sides,
mean log-probability per character. Without candidates a causal model draws --num_candidates
spans of --span_tokens (default 8) after the prefix and ranks them so; FON fills every marker
with --span_tokens holes (default 1), --num_samples times. A setting the chosen path does not
read, or two that contradict each other, stop with one line.

It runs on the device the run trained on where this machine has it (else cuda > mps > cpu), under
bfloat16 autocast on a GPU that supports it (--dtype, --device, --compile=True to choose).
"""
import contextlib
import os
import signal
import sys

import torch
import torch.nn.functional as F

from configurator import ConfigError, check, parse_args
from data import tokenizer_problem
from prepare_data import DataError, get_tokenizer
from models import DEPTH_KNOBS, check_device, check_knobs, resolve_device
import run_folder
from run_folder import load_checkpoint
from pretrained import tokenizer as pretrained_tokenizer

DEFAULTS = dict(
    out_dir='out',
    init_from='',              # '' (out_dir's checkpoint) | hf:OWNER/NAME | a folder: the Parcae authors' released weights
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
    candidates='',             # infill: '|'-separated candidate spans, each scored (one marker)
    num_candidates=16,         # causal infill without candidates: spans drawn after the prefix
    span_tokens=None,          # infill without candidates: tokens per span (None: 8 drawn by a causal
                               # model; 1 hole per marker for FON, as it was trained)
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


NOTES = set()   # the notes this process has printed: each once per run, however many samples


def note_once(msg):
    if msg not in NOTES:
        NOTES.add(msg)
        print(msg, file=sys.stderr)


@torch.no_grad()
def generate_steps(model, idx, n, temperature, top_k, g, knobs):
    """Yields the n new tokens after idx (B, T), one (B,) column at a time. Every token goes through
    decode_step (FON's and Mamba2's O(1) state, KV caches) whenever the model has one and no learned
    position table to outgrow; a model with a table decodes while the text fits it, and past it says
    once that it crops to the table's last rows, one full forward per token."""
    if knobs.get('causal') is False:
        raise ConfigError("causal=False is a non-generative (bidirectional) reading; generation is causal")
    rows = position_rows(model)
    if hasattr(model, 'decode_step') and (rows is None or idx.size(1) + n <= rows):
        step_knobs = decode_knobs(model, knobs)
        state = model.decode_init(idx.size(0), idx.device, **step_knobs)
        for t in range(idx.size(1)):
            logits, state = model.decode_step(idx[:, t], state, **step_knobs)
        for i in range(n):
            nxt = sample_logits(logits, temperature, top_k, g)
            yield nxt
            if i < n - 1:
                logits, state = model.decode_step(nxt, state, **step_knobs)
        return
    crop = rows or model.config.block_size
    if idx.size(1) + n > crop:
        why = f"its learned position table has {rows} rows" if rows else "it has no incremental decode path"
        note_once(f"note: {type(model).__name__} sees only the last {crop} tokens of a longer text ({why}); "
                  f"one full forward per token")
    for _ in range(n):
        logits, _ = model(idx[:, -crop:], **knobs)
        nxt = sample_logits(logits[:, -1], temperature, top_k, g)
        idx = torch.cat([idx, nxt[:, None]], dim=1)
        yield nxt


def generate(model, idx, n, temperature, top_k, g, knobs):
    """idx (B, T) -> (B, T + n): generate_steps' tokens after idx."""
    return torch.cat([idx] + [t[:, None] for t in generate_steps(model, idx, n, temperature, top_k, g, knobs)], 1)


@contextlib.contextmanager
def held(*signals):
    """Delivers these signals only once the block is done (where the OS can hold them)."""
    if not hasattr(signal, 'pthread_sigmask'):
        yield
        return
    was = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, was)


def streamer(decode):
    """show(ids, final): prints the text of ids not printed yet, flushed. A tokenizer may split a
    character's bytes across tokens (GPT-2, bytes): the running text is decoded whole and a trailing
    U+FFFD, a character whose bytes are not all out yet, waits for the next token."""
    shown = ''

    def show(ids, final=False):
        nonlocal shown
        text = decode(ids)
        stable = text if final else text.rstrip('\ufffd')
        new = stable[len(shown):] if stable.startswith(shown) else ('\n' + stable if final else '')
        if new:
            with held(signal.SIGINT, signal.SIGTERM, signal.SIGHUP):   # a stop waits: printed is shown
                print(new, end='', flush=True)
                shown = stable
    return show


def run_generate(model, encode, decode, start, args, g, knobs):
    """Prints --num_samples continuations of start; one streams as it comes. Ctrl-C or SIGTERM
    prints what was generated so far before the stop goes on to main."""
    ids = encode(start, 'the prompt')
    if not ids:
        raise ConfigError("--start encodes to no tokens")
    rows = [list(ids) for _ in range(args['num_samples'])]
    show = streamer(decode) if len(rows) == 1 else None
    if show:
        show(rows[0])
    idx = torch.tensor(rows, device=args['device'])
    try:
        for nxt in generate_steps(model, idx, args['max_new_tokens'], args['temperature'], args['top_k'], g, knobs):
            for row, t in zip(rows, nxt.tolist()):
                row.append(t)
            if show:
                show(rows[0])
    except KeyboardInterrupt as e:
        e.so_far = f" after {len(rows[0]) - len(ids)} of {args['max_new_tokens']} new tokens (printed)"
        print_samples(rows, decode, show)
        raise
    print_samples(rows, decode, show)


def print_samples(rows, decode, show):
    if show:
        show(rows[0], final=True)
        print()
        print('---------------', flush=True)
        return
    for row in rows:
        print(decode(row))
        print('---------------', flush=True)


# ----------------------------------------------------------------------------- infilling
@torch.no_grad()
def sequence_logprob(model, ids, score_from, knobs):
    """Sum of log p(ids[t] | ids[<t]) for t >= score_from, per row of ids (B, T)."""
    logits, _ = model(ids[:, :-1], **knobs)
    lp = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    return lp[:, score_from - 1:].sum(-1)


def per_char(total, text):
    """A log-likelihood per character of the text it scores: candidates of any length (and any
    tokenization of them) compare on one scale; a sum would rank the shortest first."""
    return total / max(len(text), 1)


def infill_causal(model, encode, decode, prefix, suffix, spans, args, knobs):
    """[(score, span text)] best first: a span's score is the mean log-likelihood per character of
    span + suffix after the prefix. The suffix is scored too: a causal model reads the span only
    from the left, so what follows the marker must be made likely by it."""
    pre = encode(prefix, 'the prompt') or encode('\n', 'the prompt')
    suf = encode(suffix, 'the prompt')
    scored = []
    for span in spans:
        check_length(model, len(pre + span + suf) - 1, "the infill text (prefix + span + suffix)")
        ids = torch.tensor([pre + span + suf], device=args['device'])
        total = sequence_logprob(model, ids, len(pre), knobs).item()
        scored.append((per_char(total, decode(span + suf)), decode(span)))
    return sorted(scored, key=lambda s: -s[0])


def draw_spans(model, encode, prefix, args, g, knobs):
    """--num_candidates spans of --span_tokens tokens sampled after the prefix (one, greedy, at
    temperature 0)."""
    pre = encode(prefix, 'the prompt') or encode('\n', 'the prompt')
    idx = torch.tensor([pre] * args['num_candidates'], device=args['device'])
    gen = generate(model, idx, args['span_tokens'], args['temperature'], args['top_k'], g, knobs)
    return [row[len(pre):].tolist() for row in gen]


def holed(encode, parts, spans, mask_id):
    """(ids, holes) of the parts with spans[i] holes between parts i and i+1."""
    ids, holes = [], []
    for i, part in enumerate(parts):
        toks = encode(part, 'the prompt')
        ids += toks
        holes += [False] * len(toks)
        if i < len(parts) - 1:
            ids += [mask_id] * spans[i]
            holes += [True] * spans[i]
    return ids, holes


@torch.no_grad()
def infill_holes(model, encode, decode, parts, mask_id, args, g, knobs):
    """--span_tokens holes per marker, each token predicted at its hole from both sides (FON's
    revision organ), all in one forward."""
    ids, holes = holed(encode, parts, [args['span_tokens']] * (len(parts) - 1), mask_id)
    check_length(model, len(ids), "the infill text")
    idx = torch.tensor([ids], device=args['device'])
    hole_mask = torch.tensor([holes], device=args['device'])
    logits, _ = model(idx, holes=hole_mask, **knobs)
    logits[..., mask_id] = float('-inf')   # a hole is filled with text, never with the MASK again
    idx[hole_mask] = sample_logits(logits[0][hole_mask[0]], args['temperature'], args['top_k'], g)
    return decode(idx[0].tolist())


@torch.no_grad()
def rank_holes(model, encode, decode, prefix, suffix, spans, mask_id, args, knobs):
    """[(score, span text)] best first: a candidate's tokens become holes (as many as it has) and
    its score is the mean log-probability per character of those tokens at their holes, each read
    from both sides by the revision organ."""
    scored = []
    for span in spans:
        ids, holes = holed(encode, [prefix, suffix], [len(span)], mask_id)
        check_length(model, len(ids), "the infill text (prefix + candidate + suffix)")
        hole_mask = torch.tensor([holes], device=args['device'])
        logits, _ = model(torch.tensor([ids], device=args['device']), holes=hole_mask, **knobs)
        lp = torch.log_softmax(logits[0][hole_mask[0]].float(), -1)
        total = lp.gather(-1, torch.tensor(span, device=lp.device)[:, None]).sum().item()
        scored.append((per_char(total, decode(span)), decode(span)))
    return sorted(scored, key=lambda s: -s[0])


def check_ids(ids, model, meta, what):
    """Ids the model has embeddings for: the battery's MASK token ('_') is outside a causal
    model's vocabulary."""
    vocab = model.config.vocab_size
    bad = [i for i in ids if i >= vocab]
    if bad:
        tok = meta.get('mask_token') if bad[0] == meta.get('mask_id') else None
        tok_what = f"the MASK token {tok!r} (id {bad[0]})" if tok else f"token id {bad[0]}"
        raise ConfigError(f"{what} holds {tok_what}, outside this {type(model).__name__}'s vocabulary of {vocab}: "
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


SEED_MAX = 2 ** 63 - 1   # every script's seed range (train.py seeds seed + rank; manual_seed takes 64 bits)


def check_args(args):
    """Option values sample.py cannot use stop here with what is accepted."""
    for k in ('num_samples', 'num_candidates'):
        if args[k] < 1:
            raise ConfigError(f"{k} must be >= 1, got {args[k]!r}")
    span = args['span_tokens']
    if span is not None and (not isinstance(span, int) or isinstance(span, bool) or span < 1):
        raise ConfigError(f"span_tokens must be None or an integer >= 1, got {span!r}")
    for k in ('max_new_tokens', 'temperature', 'top_k'):
        if args[k] < 0:
            raise ConfigError(f"{k} must be >= 0, got {args[k]!r}")
    if not 0 <= args['seed'] <= SEED_MAX:
        raise ConfigError(f"seed must be an integer from 0 to 2**63 - 1 = {SEED_MAX}, got {args['seed']}")
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


# What each way of answering reads beyond the keys every one reads (out_dir, start, seed, device,
# dtype, compile, max_depth, infill): a key given for another way would be silently ignored.
READS = {
    'generate': ('num_samples', 'max_new_tokens', 'temperature', 'top_k'),
    'rank': ('mask', 'candidates'),
    'draw': ('mask', 'num_candidates', 'span_tokens', 'temperature', 'top_k'),
    'fill': ('mask', 'num_samples', 'span_tokens', 'temperature', 'top_k'),
}
WAYS = {
    'generate': 'generation (--infill=False)',
    'rank': 'infill with --candidates (every candidate is scored and printed, best first)',
    'draw': "a causal model's infill without --candidates (--num_candidates spans of --span_tokens drawn and ranked)",
    'fill': "FON's infill without --candidates (--span_tokens holes per marker, --num_samples times)",
}


def infill_way(model, args):
    if not args['infill']:
        return 'generate'
    if args['candidates']:
        return 'rank'
    return 'fill' if 'holes' in model.knobs else 'draw'


def check_way(way, args, given):
    """One line for a key the way does not read, or for settings that contradict each other;
    the way's defaults filled in (span_tokens, num_candidates at temperature 0)."""
    for k in given:
        if k in DEFAULTS and k not in READS[way] and any(k in r for r in READS.values()):
            raise ConfigError(f"{k} does not apply to {WAYS[way]}: it reads {', '.join(READS[way])}; drop {k}")
    greedy = 'temperature' in READS[way] and args['temperature'] == 0
    if greedy and 'top_k' in given:
        raise ConfigError("top_k does nothing at temperature=0 (greedy): drop one of them")
    if greedy and args['num_samples'] > 1 and 'num_samples' in READS[way]:
        raise ConfigError(f"temperature=0 (greedy) gives the same text every time: num_samples={args['num_samples']} "
                          f"needs a temperature > 0, or pass --num_samples=1")
    if greedy and way == 'draw':
        if 'num_candidates' in given and args['num_candidates'] > 1:
            raise ConfigError(f"temperature=0 (greedy) draws the same span every time: num_candidates="
                              f"{args['num_candidates']} needs a temperature > 0, or pass --num_candidates=1")
        args['num_candidates'] = 1
    if args['span_tokens'] is None:
        args['span_tokens'] = 1 if way == 'fill' else 8


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
    model, ckpt = load_checkpoint(args['init_from'] or args['out_dir'], 'cpu')
    args['device'], note = sample_device(args['device'], ckpt['config'].get('device'))
    if note:
        print(note, file=sys.stderr)
    args['device'], _, autocast = resolve_device(args['device'], args['dtype'])
    model.to(args['device'])
    return model, ckpt, autocast


def check_model(model, ckpt, knobs, args):
    """Stops with one line where the knobs are not the model's or not sample.py's to set, a depth
    is above max_depth, or the run is a bidirectional encoder, which sample.py cannot read causally."""
    bad = [k for k in knobs if k not in model.knobs]
    if bad:
        raise ConfigError(f"unknown key(s) {', '.join(bad)}: neither a sample.py key ({', '.join(DEFAULTS)}) "
                          f"nor a knob of the {ckpt['model_name']} model ({', '.join(model.knobs) or 'none'})")
    if 'holes' in knobs:
        raise ConfigError("holes is not set by hand: --infill=True makes a hole of every --mask marker in --start")
    if knobs.get('causal') is False:
        raise ConfigError("causal=False is a non-generative (bidirectional) reading, and sample.py generates and "
                          "scores causally: drop it")
    check_knobs(knobs)
    check_depth(knobs, args['max_depth'])
    if ckpt['config'].get('causal', True) is False:
        raise ConfigError(f"{args['out_dir']} was trained with causal=False, a bidirectional encoder and never a "
                          f"generator, and sample.py reads causally: fill its holes with "
                          f"python -m tools.eval --out_dir={args['out_dir']} --battery=True")


def read_tokenizer(model, ckpt, out_dir):
    """(meta, encode, decode) of the checkpoint's tokenizer; encode(text, what) stops with one line
    on text the tokenizer cannot encode or ids the model has no row for."""
    meta = ckpt.get('meta')
    if ckpt.get('release'):   # the authors' tokenizer.json (pretrained.read_release)
        try:
            encode_raw, decode, _ = pretrained_tokenizer(meta)
        except ValueError as e:   # no tokenizer.json, or no tokenizers package
            raise ConfigError(str(e)) from None
        print(f"{ckpt['release']}: Parcae of {model.num_params() / 1e6:.1f}M parameters, tokenizer "
              f"{meta['tokenizer_file']}", file=sys.stderr)
    elif not isinstance(meta, dict) or 'tokenizer' not in meta:
        raise ConfigError(f"the checkpoint in {out_dir} carries no tokenizer (meta['tokenizer']): "
                          f"it was trained on data whose meta.json does not name one")
    elif tokenizer_problem(meta):
        raise ConfigError(f"the checkpoint in {out_dir} cannot decode: its meta {tokenizer_problem(meta)}")
    else:
        encode_raw, decode = get_tokenizer(meta)

    def encode(text, what):  # characters outside a char vocabulary: one line, not a traceback
        try:
            ids = encode_raw(text)
        except ValueError as e:
            raise ConfigError(f"{what} cannot be encoded with the {meta['tokenizer']} tokenizer: {e}")
        return check_ids(ids, model, meta, what)
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


def hole_id(model, ckpt, meta, knobs):
    """The MASK id FON's holes hold, where the model has a row for it and its revision organ runs."""
    mask_id = ckpt['config'].get('mask_id')
    mask_id = meta.get('mask_id', meta['vocab_size']) if mask_id is None else mask_id
    if mask_id >= model.config.vocab_size:
        raise ConfigError(f"the model has {model.config.vocab_size} embedding rows, no row for the MASK id "
                          f"{mask_id}, and a fine-tune cannot add one: train with holes from the start "
                          f"(train.py --p_fill=0.5 sizes the vocabulary for the MASK id)")
    if (knobs.get('coupling') or model.config.coupling) == 'AR':
        raise ConfigError("coupling=AR runs the drafting stream only, whose logits at a hole predict the token "
                          "after it: FON fills holes with coupling=OD or PC")
    return mask_id


def read_candidates(text, encode, mask_id):
    """The --candidates spans as token ids: each some text the tokenizer encodes, none the MASK id."""
    spans = []
    for i, c in enumerate(text.split('|')):
        if not c:
            raise ConfigError(f"candidate {i + 1} of {text!r} is empty: every candidate must be some text "
                              f"(to try a fill of nothing, write the prompt without the marker)")
        ids = encode(c, f"candidate {c!r}")
        if mask_id in ids:
            raise ConfigError(f"candidate {c!r} holds the MASK token: a candidate is text to score")
        spans.append(ids)
    return spans


def print_ranked(scored, parts, how):
    print(f"candidates ranked by {how}; higher is better, best first:")
    for score, span in scored:
        print(f"{score:9.4f}  {parts[0]}{span}{parts[1]}")
        print('---------------')


def infill(model, ckpt, meta, encode, decode, start, args, g, knobs):
    """Fills the --mask markers in start the way infill_way picks: candidates ranked (FON through
    its holes, another model causally), spans drawn and ranked (causal), holes filled (FON)."""
    parts = start.split(args['mask'])
    if len(parts) < 2:
        raise ConfigError(f"--infill needs the marker {args['mask']!r} in --start")
    fon = 'holes' in model.knobs
    mask_id = hole_id(model, ckpt, meta, knobs) if fon else None
    if len(parts) > 2 and (args['candidates'] or not fon):
        who = "candidates fill" if args['candidates'] else f"a causal model ({type(model).__name__}) fills"
        raise ConfigError(f"{who} one span: put exactly one marker {args['mask']!r} in --start, not {len(parts) - 1}")
    if fon and not args['candidates']:
        for _ in range(args['num_samples']):
            print(infill_holes(model, encode, decode, parts, mask_id, args, g, knobs))
            print('---------------')
        return
    if fon:
        spans = read_candidates(args['candidates'], encode, mask_id)
        print_ranked(rank_holes(model, encode, decode, parts[0], parts[1], spans, mask_id, args, knobs), parts,
                     "FON's revision organ: mean log-probability per character of the candidate's tokens as "
                     "holes, each read from both sides")
        return
    if args['candidates']:
        spans = read_candidates(args['candidates'], encode, mask_id)
        if not parts[1]:
            note_once("note: nothing follows the marker, so nothing scores where a candidate ends ('4' against "
                      "'46'): end --start with the text that follows it (the battery's lines end with a newline)")
    else:
        spans = draw_spans(model, encode, parts[0], args, g, knobs)
    print_ranked(infill_causal(model, encode, decode, parts[0], parts[1], spans, args, knobs), parts,
                 "mean log-likelihood per character of the span and the text after the marker, given the text "
                 "before it (a causal reading)")


def interrupted(e):
    """Ctrl-C, SIGTERM or SIGHUP (run_folder.stop carries its number): one line, exit 128 + the
    signal's number (130, 143, 129), as train.py does."""
    signum = getattr(e, 'signum', signal.SIGINT)
    how = '' if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
    print(f"interrupted{how}{getattr(e, 'so_far', '')}", file=sys.stderr)
    sys.exit(128 + int(signum))


def main(argv):
    knobs = {}
    try:
        given = parse_args(argv)
        args = {**DEFAULTS, **check(given.pick(DEFAULTS), DEFAULTS)}
        check_args(args)
        model, ckpt, autocast = load_model(args)
        knobs = {k: v for k, v in given.items() if k not in DEFAULTS}
        check_model(model, ckpt, knobs, args)
        check_way(infill_way(model, args), args, given)
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
        else:
            run_generate(model, encode, decode, start, args, g, knobs)
    except (ConfigError, DataError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:   # | head: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except KeyboardInterrupt as e:
        interrupted(e)
    except (TypeError, ValueError) as e:   # a knob value the model rejects
        if not knobs:
            raise
        print(f"error: the model cannot run with {', '.join(f'{k}={v!r}' for k, v in knobs.items())}: "
              f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
        sys.exit(2)


if __name__ == '__main__':
    for sig in (signal.SIGTERM, signal.SIGHUP):   # as Ctrl-C, with the signal's number; one ignored stays so (nohup)
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, run_folder.stop)
    main(sys.argv[1:])
