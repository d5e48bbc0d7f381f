"""
Where eval.py's results go: JSON files (NaN/inf as null) and matplotlib figures (Agg, no display).
"""
import json
import math
import os


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
