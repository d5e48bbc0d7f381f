"""
nanoGPT-style configuration, shared by train.py, sample.py, eval.py and bench.py:

    python train.py config/parcae_140m.py --batch_size=16 --compile=False

A config file is plain Python assignments. --key=value overrides come after it; values are parsed
with ast.literal_eval (a bare word stays a string) and must have the type of the default. A
mistake stops with one line that says what was wrong and what is accepted (ConfigError).

A config may name the config it varies, so that an ablation shows only what it changes:

    base = 'textnca_hier.py'      # a path relative to this file's folder, or a tuple of them
    out_dir = 'out-textnca-k2'
    windows = (16, 128)

The base files are read first (in order, each with its own bases), then this file's assignments
replace their values. A config cannot use a base's values in its own expressions.
"""
import ast
import difflib
import os
import sys
import types


class ConfigError(Exception):
    pass


def _read_file(path, chain=()):
    """The settings of one config file, its bases' first; chain: the files that named it as a base."""
    if not os.path.isfile(path):
        named_by = f" (the base of {chain[-1]})" if chain else " (expected a path such as config/gpt_140m.py)"
        raise ConfigError(f"config file not found: {path}{named_by}")
    if os.path.realpath(path) in map(os.path.realpath, chain):
        raise ConfigError(f"config files name each other as base in a cycle: {' -> '.join(chain + (path,))}")
    ns = {}
    try:
        exec(compile(open(path).read(), path, 'exec'), ns)
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
    return {**settings, **own}


def parse_args(argv):
    """Config files and --key=value pairs, in order, into one dict of settings."""
    given = {}
    for arg in argv:
        if arg in ('-h', '--help'):  # the script's own docstring is its usage
            print((sys.modules['__main__'].__doc__ or '').strip())
            sys.exit(0)
        if not arg.startswith('--'):
            given.update(_read_file(arg))
            continue
        key, eq, val = arg[2:].partition('=')
        if not eq or not key:
            raise ConfigError(f"expected --key=value, got {arg!r}")
        try:
            given[key] = ast.literal_eval(val)
        except (ValueError, SyntaxError):
            given[key] = val
    return given


def check(given, known):
    """Every given key must be known; every value must have its default's type (None: any type)."""
    for key, val in given.items():
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=3)
            hint = f" (did you mean: {', '.join(close)}?)" if close else f" (known keys: {', '.join(sorted(known))})"
            raise ConfigError(f"unknown config key '{key}'{hint}")
        default = known[key]
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
            raise ConfigError(f"config key '{key}' expects {type(default).__name__} (default {default!r}), "
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
