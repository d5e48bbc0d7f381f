"""
nanoGPT-style configuration, shared by train.py, sample.py and the tools, and the checks that keep
a mistake to one line (values, and the data a config names):

    python train.py config/parcae_140m.py --batch_size=16 --compile=False

A config file is plain Python assignments. --key=value overrides come after it; values are parsed
with ast.literal_eval (a bare word stays a string) and must have the type of the default. A
mistake stops with one line that says what was wrong and what is accepted (ConfigError).

A config may name the config it varies, so that an ablation shows only what it changes:

    base = 'textnca_hier.py'      # a path relative to this file's folder, or a tuple of them
    out_dir = 'out-textnca_k2'
    windows = (16, 128)

The base files are read first (in order, each with its own bases), then this file's assignments
replace their values. A config cannot use a base's values in its own expressions.
"""
import ast
import difflib
import hashlib
import json
import math
import os
import pickle
import sys
import time
import types

import numpy as np


class ConfigError(Exception):
    pass


def stop_on_signals(before=None):
    """A scheduler's SIGTERM and a closed terminal's SIGHUP stop a command as Ctrl-C does (its
    KeyboardInterrupt path: one line, no file left half written); a signal the launcher ignores
    stays ignored (nohup's SIGHUP). before: run first (tools.results stops its train.py children)."""
    import signal

    def stop(signum, frame):
        if before is not None:
            before()
        raise KeyboardInterrupt(signal.Signals(signum).name)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, stop)


def fail(msg):
    """One line on stderr (from rank 0 only under torchrun: every rank meets the same mistake), exit 2."""
    if int(os.environ.get('RANK', 0)) == 0:
        print(f"error: {msg}", file=sys.stderr)
    else:
        # rank 0 exits first and torchrun then stops this rank: were this rank first, torchrun
        # could stop rank 0 before its line is out
        time.sleep(30)
    sys.exit(2)


class Settings(dict):
    """Given settings, with where each came from (origin: key -> config file; absent: the command
    line) and the text of each command-line value (raw), so that a str key may take '46' or 'None'."""
    def __init__(self, *a, origin=None, raw=None):
        super().__init__(*a)
        self.origin, self.raw = dict(origin or {}), dict(raw or {})

    def pick(self, keys):
        """The settings whose key is in keys, with their origins."""
        return Settings({k: v for k, v in self.items() if k in keys}, origin=self.origin, raw=self.raw)

    def where(self, key):
        return f"in {self.origin[key]}" if key in self.origin else "on the command line"


def _read_file(path, chain=()):
    """The settings of one config file, its bases' first; chain: the files that named it as a base.
    Each value is a (value, file) pair."""
    if os.path.isdir(path):
        raise ConfigError(f"{path} is a folder, not a config file (name a file such as config/cpu_parcae.py)")
    if not os.path.isfile(path):
        named_by = f" (the base of {chain[-1]})" if chain else " (expected a path such as config/gpt_140m.py)"
        raise ConfigError(f"config file not found: {path}{named_by}")
    if os.path.realpath(path) in map(os.path.realpath, chain):
        raise ConfigError(f"config files name each other as base in a cycle: {' -> '.join(chain + (path,))}")
    ns = {}
    try:
        exec(compile(open(path).read(), path, 'exec'), ns)
    except SystemExit as e:  # exit() in a config would end the run silently
        raise ConfigError(f"config file {path} called sys.exit({e.code!r}); a config file only assigns settings")
    except Exception as e:  # a broken config file is the user's to fix: say where
        raise ConfigError(f"config file {path} failed to run: {type(e).__name__}: {e}")
    own = {k: v for k, v in ns.items() if not k.startswith('_')
           and not isinstance(v, (types.ModuleType, types.FunctionType, type))}
    base = own.pop('base', ())
    bases = (base,) if isinstance(base, str) else base
    if not isinstance(bases, (tuple, list)) or not all(isinstance(b, str) for b in bases):
        raise ConfigError(f"{path}: base must be a config file name or a tuple of them, got {base!r}")
    settings = {}
    for b in bases:
        settings.update(_read_file(os.path.join(os.path.dirname(path), b), chain + (path,)))
    return {**settings, **{k: (v, path) for k, v in own.items()}}


def parse_args(argv):
    """Config files and --key=value pairs, in order, into one dict of settings (a Settings)."""
    given = Settings()
    for arg in argv:
        if arg in ('-h', '--help'):  # the script's own docstring is its usage
            print((sys.modules['__main__'].__doc__ or '').strip())
            sys.exit(0)
        if not arg.startswith('--'):
            for k, (v, path) in _read_file(arg).items():
                given[k], given.origin[k] = v, path
                given.raw.pop(k, None)
            continue
        key, eq, val = arg[2:].partition('=')
        if not eq or not key:
            raise ConfigError(f"expected --key=value, got {arg!r}")
        try:
            given[key] = ast.literal_eval(val)
        except (ValueError, SyntaxError):
            given[key] = val
        given.origin.pop(key, None)
        given.raw[key] = val
    return given


def check(given, known):
    """Every given key must be known; every value must have its default's type (None: any type).
    A str key given on the command line takes the text as typed (--start=123, --candidates=None)."""
    origin, raw = getattr(given, 'origin', {}), getattr(given, 'raw', {})
    for key, val in list(given.items()):
        where = f" in {origin[key]}" if key in origin else ""
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=3)
            hint = f" (did you mean: {', '.join(close)}?)" if close else f" (known keys: {', '.join(sorted(known))})"
            raise ConfigError(f"unknown config key '{key}'{where}{hint}")
        default = known[key]
        if isinstance(default, str) and not isinstance(val, str) and key in raw:
            given[key] = val = raw[key]
        if default is None or val is None:
            continue
        if isinstance(default, bool) or isinstance(val, bool):
            ok = isinstance(val, bool) and isinstance(default, bool)
        elif isinstance(default, float):
            ok = isinstance(val, (int, float))
        elif isinstance(default, (tuple, list)):
            ok = isinstance(val, (tuple, list, int))  # an int may stand for one value per layer
        else:
            ok = isinstance(val, type(default))
        if not ok:
            raise ConfigError(f"config key '{key}'{where} expects {type(default).__name__} (default {default!r}), "
                              f"got {type(val).__name__} {val!r}")
        if isinstance(default, float) and not isinstance(val, bool):
            given[key] = float(val)
        if isinstance(default, tuple) and isinstance(val, list):
            given[key] = tuple(val)
    return given


RANGES = {  # a kind of value: (its test, what is accepted)
    'positive': (lambda v: v > 0, '> 0'),
    'non_negative': (lambda v: v >= 0, '>= 0'),
    'fraction': (lambda v: 0 <= v <= 1, 'between 0 and 1'),
    'below_one': (lambda v: 0 <= v < 1, 'in [0, 1)'),
}


def check_values(cfg, ranges, choices, none_or):
    """Values a script cannot run with stop here, with what is accepted. ranges: a kind of RANGES ->
    its keys; choices: key -> the accepted values; none_or: key -> the type it takes where it is
    not None (None: derived later, allowed)."""
    for k, kind in none_or.items():
        if cfg[k] is not None and (not isinstance(cfg[k], kind) or isinstance(cfg[k], bool) != (kind is bool)):
            raise ConfigError(f"{k} must be None or {getattr(kind, '__name__', 'a number')}, got {cfg[k]!r}")
    for k, v in cfg.items():    # 1e999 parses as inf: no setting means that
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"{k} must be a finite number, got {v!r}")
    for name, keys in ranges.items():
        test, accepted = RANGES[name]
        for k in keys:
            if cfg[k] is None and k in none_or:
                continue
            if not isinstance(cfg[k], (int, float)) or not test(cfg[k]):
                raise ConfigError(f"{k} must be {accepted}, got {cfg[k]!r}")
    for k, ok in choices.items():
        if cfg[k] not in ok:
            raise ConfigError(f"{k} must be {' or '.join(map(repr, ok))}, got {cfg[k]!r}")


def defaults_of(namespace):
    """A script's settings, from its globals(): the ints, floats, bools, strings, tuples and Nones
    assigned at its top level (no _private name, no UPPER_CASE constant, no module or function)."""
    return {k: v for k, v in namespace.items() if not k.startswith('_') and not k.isupper()
            and isinstance(v, (int, float, bool, str, tuple, type(None)))}


CHECKS = {  # what train.py can run with: a kind of RANGES -> its keys
    'positive': ('batch_size', 'block_size', 'gradient_accumulation_steps', 'eval_interval', 'log_interval', 'eval_iters',
                 'hole_stride', 'learning_rate', 'eps', 'n_layer', 'n_head', 'n_embd', 'vocab_size', 'lr_decay_iters',
                 'muon_lr'),
    'non_negative': ('max_iters', 'warmup_iters', 'min_lr', 'weight_decay', 'grad_clip', 'muon_momentum', 'muon_weight_decay'),
    'fraction': ('p_synth', 'p_fill', 'p_hole', 'cooldown_frac', 'dropout'),
    'below_one': ('beta1', 'beta2'),
}
CHOICES = {'sampler': ('random', 'blocks'), 'schedule': ('cosine', 'constant', 'trapezoid'), 'optimizer': ('adamw', 'muon'),
           'muon_variant': ('torch', 'parcae'), 'loss_on': ('all', 'answers')}
NONE_OR = {'compile': bool, 'tf32': bool, 'mask_id': int, 'vocab_size': int, 'lr_decay_iters': int, 'muon_lr': (int, float)}


def check_settings(cfg):
    """train.py's settings, checked before anything is built."""
    check_values(cfg, CHECKS, CHOICES, NONE_OR)
    if cfg['mask_id'] is not None and cfg['mask_id'] < 0:
        raise ConfigError(f"mask_id must be None or a token id >= 0, got {cfg['mask_id']!r}")
    if not cfg['out_dir']:
        raise ConfigError("out_dir must name a folder, got ''")
    if not cfg['causal']:    # a BERT-style encoder: full attention, trained at holes only
        if cfg['model'] != 'gpt':
            raise ConfigError(f"causal=False needs model 'gpt' (full attention; the {cfg['model']} model has no "
                              f"bidirectional reading), got model={cfg['model']!r}")
        if cfg['p_fill'] <= 0:
            raise ConfigError("causal=False trains on holes only (with full attention every other target is in "
                              f"the input): it needs p_fill > 0, got p_fill={cfg['p_fill']!r}")
        windows = cfg.get('windows') or ()
        if any((windows,) if isinstance(windows, int) else windows):
            raise ConfigError(f"causal=False needs global attention layers, got windows={windows!r} (windows are causal)")


# ----------------------------------------------------------------------------- the data a config names
def prepare_hint(dataset):
    """The command that makes data/<dataset>."""
    import prepare_data   # tiktoken and requests: only when a hint is needed
    return prepare_data.prepare_command(dataset)


NANOGPT_VOCAB = 50304   # GPT-2's 50257 tokens padded to a multiple of 64, as nanoGPT's train.py pads them


def read_meta(cfg):
    """The dataset's meta (None when data/<dataset> holds no data): its meta.json, else one of
    nanoGPT's layouts, named by meta['layout']: a meta.pkl (its char datasets: vocab_size, itos,
    stoi) or no meta file beside train.bin (its GPT-2 BPE datasets, vocab 50304)."""
    folder = os.path.join(cfg['data_dir'], cfg['dataset'])
    path = os.path.join(folder, 'meta.json')
    if os.path.isfile(path):
        try:
            meta = json.load(open(path, encoding='utf-8'))
        except (ValueError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path} is not valid JSON ({e}): re-run {prepare_hint(cfg['dataset'])}")
    elif os.path.isfile(os.path.join(folder, 'meta.pkl')):
        path = os.path.join(folder, 'meta.pkl')
        meta = read_meta_pkl(path)
    elif os.path.isfile(os.path.join(folder, 'train.bin')):
        return {'tokenizer': 'gpt2', 'vocab_size': NANOGPT_VOCAB,
                'layout': f"nanoGPT's, no meta file: the GPT-2 tokenizer, vocab {NANOGPT_VOCAB}"}
    else:
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get('vocab_size'), int) or meta['vocab_size'] <= 0:
        raise ConfigError(f"{path} lacks a positive integer vocab_size: re-run {prepare_hint(cfg['dataset'])}")
    problem = tokenizer_problem(meta)
    if problem:
        raise ConfigError(f"{path} {problem}: re-run {prepare_hint(cfg['dataset'])}")
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
    meta = {'vocab_size': raw.get('vocab_size'), 'layout': "nanoGPT's meta.pkl"}
    itos, stoi = raw.get('itos'), raw.get('stoi')
    if itos is None and isinstance(stoi, dict):
        itos = {i: c for c, i in stoi.items()}
    if isinstance(itos, dict):
        itos = [itos.get(i) for i in range(len(itos))]
    if itos is not None:
        meta.update(tokenizer='char', itos=itos)
        meta['layout'] += f": a char vocabulary of {len(itos)}"
    return meta


def tokenizer_problem(meta):
    """What keeps a meta's tokenizer from decoding (a char meta needs its itos table), else None."""
    kind = meta.get('tokenizer')
    if kind is None or kind in ('gpt2', 'byte'):
        return None
    if kind != 'char':
        return f"names the tokenizer {kind!r}, not one of gpt2, byte, char"
    itos = meta.get('itos')
    if isinstance(itos, dict):
        itos = [itos.get(str(i)) for i in range(len(itos))]
    if not isinstance(itos, list) or not itos or not all(isinstance(c, str) for c in itos):
        return "has no itos (a list of the char tokenizer's symbols, id -> character) to decode with"
    return None


def check_tokens(path, min_tokens, vocab_size=None, data=None):
    """A .bin stream of uint16 token ids: whole tokens, at least min_tokens of them, and (when
    vocab_size is given) every id below it. One pass over the file for the ids. data: the stream
    as the caller opened it (its memmap), checked instead of the file now at path."""
    size = data.nbytes if data is not None else os.path.getsize(path)
    if size == 0 or size % 2:
        raise ConfigError(f"{path} holds {size} bytes, not a whole positive number of uint16 tokens "
                          f"(2 bytes each): prepare the data again")
    if size // 2 < min_tokens:
        raise ConfigError(f"{path} holds {size // 2} tokens, fewer than the {min_tokens} needed; lower --block_size")
    if vocab_size is not None:
        top = int(np.max(data if data is not None else np.memmap(path, dtype=np.uint16, mode='r')))
        if top >= vocab_size:
            raise ConfigError(f"{path} holds token id {top}, outside the vocabulary of {vocab_size} "
                              f"(meta.json's vocab_size or --vocab_size); prepare the data again")


def stream_record(f):
    """What tells a .bin stream from another cheaply, from its open file: its bytes and the sha256
    of its first MiB."""
    size = os.fstat(f.fileno()).st_size
    f.seek(0)
    return {'bytes': size, 'head': hashlib.sha256(f.read(2 ** 20)).hexdigest()}


def data_record(cfg, meta, streams):
    """What a checkpoint records of the data it trained on: each stream's stream_record (streams:
    name -> record), the vocabulary, and the sha256 of the dataset's meta.json."""
    path = os.path.join(cfg['data_dir'], cfg['dataset'], 'meta.json')
    digest = hashlib.sha256(open(path, 'rb').read()).hexdigest() if os.path.isfile(path) else None
    return {**streams, 'vocab_size': meta['vocab_size'], 'meta.json': digest}


def check_data(then, now, where, hint):
    """Stops (one line naming what changed) when the data found now is not the data a checkpoint
    recorded; then: its record (None: a checkpoint from before records, nothing to compare); a
    stream or key the data found now lacks is not compared."""
    changed = []
    for k, v in (then or {}).items():
        w = now.get(k)
        if w is None or w == v:
            continue
        if isinstance(v, dict) and v.get('bytes') != w.get('bytes'):
            changed.append(f"{k}.bin holds {w['bytes']:,} bytes (then {v['bytes']:,})")
        elif isinstance(v, dict):
            changed.append(f"{k}.bin's first MiB differs")
        elif k == 'vocab_size':
            changed.append(f"vocab_size is {w} (then {v})")
        else:
            changed.append(f"{k} differs")
    if changed:
        raise ConfigError(f"the data in {where} is not what the checkpoint trained on ({'; '.join(changed)}): {hint}")


def example_starts(path, newline, T, data=None):
    """Where a window of T + 1 tokens may start in a synthetic stream so that it holds a whole
    example (loss_on='answers': the answer with all it depends on): 0 and every position after a
    newline, up to the last full window. newline: the tokenizer's ids of '\\n' (one id); data: the
    stream as the caller opened it (its memmap), else the file at path."""
    marks = path[:-4] + '_answers.bin'
    if not os.path.isfile(marks) or len(newline) != 1:
        raise ConfigError(f"loss_on='answers' needs {marks}, the answer marks of a synthetic dataset "
                          f"(python prepare_data.py hops, or synthetic)")
    data = np.memmap(path, dtype=np.uint16, mode='r') if data is None else data
    starts = np.concatenate([[0], np.flatnonzero(data == newline[0]) + 1])
    longest = int(np.diff(starts).max())
    if longest > T + 1:
        raise ConfigError(f"loss_on='answers': {path} holds examples of up to {longest} tokens, so a window of "
                          f"block_size {T} may cut one; raise block_size to at least {longest - 1}")
    return starts[starts <= len(data) - T - 1]


def dataset_vocab(cfg, meta):
    """The model's vocab size: the config's, else the data's (one more when holes need a MASK id)."""
    need = meta['vocab_size'] if meta else None
    mid = cfg['mask_id'] if cfg['mask_id'] is not None else (meta or {}).get('mask_id', need)
    if cfg['p_fill'] > 0 and mid is not None:
        need = max(need, mid + 1)
    if cfg['vocab_size'] is None:
        if need is None:
            raise ConfigError(f"vocab_size is not set and {cfg['data_dir']}/{cfg['dataset']}/meta.json does not exist; "
                              f"set --vocab_size or prepare the data ({prepare_hint(cfg['dataset'])})")
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
