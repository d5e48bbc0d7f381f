"""
A run's curves as a PNG, for those who do not use wandb: training and eval loss and the learning
rate against tokens seen, from the run's log.jsonl (matplotlib Agg, no display).

    python -m tools.report --out_dir=out              # writes out/curves.png
    python -m tools.report --out_dir=out --png=a.png

Also where eval.py's results go: JSON files (NaN/inf as null) and matplotlib figures.
"""
import json
import math
import os
import sys

DEFAULTS = dict(
    out_dir='out',     # the run folder: its log.jsonl and config.json
    png='',            # '': out_dir/curves.png
)


def clean(x):
    """JSON-safe: NaN/inf become null, tensors and numpy arrays and numbers plain Python."""
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if hasattr(x, 'tolist'):   # torch.Tensor, np.ndarray, np.float64 ...
        return clean(x.tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def replace_with(path, write):
    """write(tmp) a whole file beside path, then rename it onto path; a failure leaves path as it was."""
    tmp = f'{path}.tmp'
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_text(path, text):
    def write(tmp):
        with open(tmp, 'w') as f:
            f.write(text)
    replace_with(path, write)


def write_json(path, obj):
    def write(tmp):
        with open(tmp, 'w') as f:
            json.dump(clean(obj), f, indent=1)
    replace_with(path, write)
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
    try:
        replace_with(path, lambda tmp: fig.savefig(tmp, dpi=120, format=os.path.splitext(path)[1][1:] or 'png'))
    finally:
        plt.close(fig)
    print(f"wrote {path}")
    return n


def read_log(path):
    """(train records, eval records) of a train.py log.jsonl. A last line cut short (a killed run)
    is skipped, as a resumed run drops it; any other line that is not a record is a ConfigError."""
    from configurator import ConfigError
    if os.path.isdir(path) or not os.path.isfile(path):
        raise ConfigError(f"{path} is {'a folder' if os.path.isdir(path) else 'not there'}: expected the log.jsonl "
                          f"that train.py writes into its out_dir")
    try:
        lines = open(path, encoding='utf-8').read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path} cannot be read as text ({e})")
    recs = []
    for n, line in enumerate(lines, 1):
        try:
            rec = json.loads(line)
        except ValueError:
            if n == len(lines):
                continue
            rec = None
        if not (isinstance(rec, dict) and rec.get('kind') in ('train', 'eval') and isinstance(rec.get('iter'), int)):
            raise ConfigError(f"{path} line {n} is not a train.py log record (a JSON object with kind 'train' or "
                              f"'eval' and an iter): {line[:80]!r}")
        recs.append(rec)
    train = [r for r in recs if r['kind'] == 'train' and isinstance(r.get('loss'), (int, float))]
    if not train:
        raise ConfigError(f"{path} holds no training records yet (train.py writes one every log_interval iterations)")
    return train, [r for r in recs if r['kind'] == 'eval']


def tokens_per_iter(out_dir, evals):
    """From the run's config.json, else from an eval record's tokens; None when neither says."""
    try:
        c = json.load(open(os.path.join(out_dir, 'config.json')))
        return c['batch_size'] * c['block_size'] * c['gradient_accumulation_steps']
    except (OSError, ValueError, KeyError, TypeError):
        return next((r['tokens'] // r['iter'] for r in evals if r['iter'] > 0 and 'tokens' in r), None)


def plot_log(out_dir, png):
    """Loss (training, and eval's train and val) above the learning rate, against tokens seen."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    train, evals = read_log(os.path.join(out_dir, 'log.jsonl'))
    per = tokens_per_iter(out_dir, evals)
    x = (lambda r: r['iter'] * per) if per else (lambda r: r['iter'])
    fig, (ax, ax_lr) = plt.subplots(2, 1, sharex=True, figsize=(6.4, 5.6), height_ratios=(3, 1))
    ax.set_title(os.path.basename(os.path.abspath(out_dir)))
    ax.plot([x(r) for r in train], [r['loss'] for r in train], lw=0.8, alpha=0.7, label='train (one batch)')
    for key in ('train_loss', 'val_loss'):
        pts = [(x(r), r[key]) for r in evals if isinstance(r.get(key), (int, float))]
        if pts:
            ax.plot(*zip(*pts), 'o-', ms=3, label=f"eval {key.split('_')[0]}")
    ax.set_ylabel('loss (nats/token)')
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax_lr.plot([x(r) for r in train if 'lr' in r], [r['lr'] for r in train if 'lr' in r], color='gray')
    ax_lr.set_ylabel('lr')
    ax_lr.set_xlabel('tokens' if per else 'iteration (no config.json to count tokens)')
    ax_lr.grid(alpha=0.3)
    fig.tight_layout()
    try:
        replace_with(png, lambda tmp: fig.savefig(tmp, dpi=120, format='png'))
    finally:
        plt.close(fig)
    print(f"wrote {png}")


def main(argv):
    from configurator import ConfigError, check, fail, parse_args
    try:
        opt = {**DEFAULTS, **check(parse_args(argv), DEFAULTS)}
        png = opt['png'] or os.path.join(opt['out_dir'], 'curves.png')
        plot_log(opt['out_dir'], png)
    except ConfigError as e:
        fail(e)
    except OSError as e:   # the PNG cannot be written
        fail(f"cannot write {png}: {e.strerror or e}")


if __name__ == '__main__':
    main(sys.argv[1:])
