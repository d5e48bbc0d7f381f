"""
nanoGPT-style configuration, shared by train.py, sample.py and the tools, and the value checks
that keep a mistake to one line:

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
import math
import os
import sys
import time
import types


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
        time.sleep(120)
    sys.exit(2)


class Settings(dict):
    """Given settings, with where each came from (origin: key -> config file; absent: the command
    line), the text of each command-line value (raw), so that a str key may take '46' or 'None',
    and the arguments as given (argv), which a printed command repeats."""
    def __init__(self, *a, origin=None, raw=None, argv=()):
        super().__init__(*a)
        self.origin, self.raw, self.argv = dict(origin or {}), dict(raw or {}), list(argv)

    def pick(self, keys):
        """The settings whose key is in keys, with their origins."""
        return Settings({k: v for k, v in self.items() if k in keys}, origin=self.origin, raw=self.raw, argv=self.argv)

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
    given = Settings(argv=argv)
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
        if key in REMOVED and key not in known:
            raise ConfigError(f"config key '{key}'{where} was removed: {REMOVED[key]}")
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
        if key == 'seed' and not 0 <= val <= MAX_SEED:
            raise ConfigError(f"seed{where} must be an integer from 0 to 2**63 - 1 = {MAX_SEED} (torch.manual_seed "
                              f"takes a 64-bit integer, and train.py seeds each process with seed + its rank), got {val}")
        if isinstance(default, float) and not isinstance(val, bool):
            given[key] = float(val)
        if isinstance(default, tuple) and isinstance(val, list):
            given[key] = tuple(val)
    return given


REMOVED = {  # keys no config used any more: what stands in their place
    'muon_beta2': "muon_variant='parcae' decays its second moment at ParcaeMuon's own 0.95 (Parcae Q.2)",
}
MAX_SEED = 2 ** 63 - 1   # every script's seed: torch.manual_seed(seed + rank) overflows past 2**64 - 1

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
                 'muon_lr', 'dist_timeout_s'),
    'non_negative': ('max_iters', 'warmup_iters', 'min_lr', 'weight_decay', 'grad_clip', 'muon_momentum', 'muon_weight_decay'),
    'fraction': ('p_synth', 'p_fill', 'p_hole', 'cooldown_frac', 'dropout'),
    'below_one': ('beta1', 'beta2'),
}
CHOICES = {'sampler': ('random', 'blocks'), 'schedule': ('cosine', 'constant', 'trapezoid'), 'optimizer': ('adamw', 'muon'),
           'muon_variant': ('torch', 'parcae'), 'loss_on': ('all', 'answers'), 'parallel': ('ddp', 'fsdp')}
NONE_OR = {'compile': bool, 'tf32': bool, 'mask_id': int, 'vocab_size': int, 'lr_decay_iters': int, 'muon_lr': (int, float),
           'micro_batch_size': int}


def check_settings(cfg):
    """train.py's settings, checked before anything is built."""
    check_values(cfg, CHECKS, CHOICES, NONE_OR)
    if cfg['mask_id'] is not None and cfg['mask_id'] < 0:
        raise ConfigError(f"mask_id must be None or a token id >= 0, got {cfg['mask_id']!r}")
    if not cfg['out_dir']:
        raise ConfigError("out_dir must name a folder, got ''")
    mb = cfg.get('micro_batch_size')
    if mb is not None and (mb < 1 or cfg['batch_size'] % mb):
        divisors = [d for d in range(1, cfg['batch_size'] + 1) if cfg['batch_size'] % d == 0]
        raise ConfigError(f"micro_batch_size must be None or divide batch_size={cfg['batch_size']} (it splits each "
                          f"process's sequences into micro-steps of that many): {', '.join(map(str, divisors))}; got {mb!r}")
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
