"""
eval.py's --sweep: the loss of a checkpoint at each value of one forward knob, and for num_recur
(or with --fit=True) the fit L(T) = L_inf + Z exp(-z T) of Parcae section 5.3 through the points.

    python -m tools.eval --out_dir=out --sweep=num_recur=1..24  # Parcae test-time depth + L(T) fit
    python -m tools.eval --out_dir=out --sweep=Ts=1,2,4,6,8     # TextNCA inference-time Ts

The fit is least squares: a grid over z with (L_inf, Z) solved linearly for each z, then a
golden-section refine; where the points cannot pin the three constants down, the fit says why
(unidentified). Each measured point goes to sweep_KNOB.partial.json as it comes, so a stopped sweep
keeps what it has; the whole one to sweep_KNOB.json and sweep_KNOB.png. run_sweep takes eval.py's
Evaluator (its score, knob names, options and output folder).
"""
import ast
import math
import os
import time

import numpy as np

import models
from configurator import ConfigError
from tools.report import axes, save_figure, write_json


def parse_values(text):
    """'1,2,4' -> [1, 2, 4]; '1..24' -> 1..24 inclusive; words stay strings ('AR,PC')."""
    text = str(text)
    if '..' in text and ',' not in text:
        a, b = text.split('..', 1)
        try:
            a, b = int(a), int(b)
        except ValueError:
            raise ConfigError(f"expected a range A..B of integers, got {text!r}")
        if a > b:
            raise ConfigError(f"the range {text} is empty: A..B runs from A up to B (A <= B), e.g. {b}..{a}")
        return list(range(a, b + 1))
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


def run_sweep(ev):
    if '=' not in ev.opt['sweep']:
        raise ConfigError(f"--sweep expects KNOB=V1,V2,..., got {ev.opt['sweep']!r}")
    knob, vals = ev.opt['sweep'].split('=', 1)
    if knob not in ev.knob_names:
        raise ConfigError(f"{ev.name} has no knob '{knob}' (its forward takes: {', '.join(ev.knob_names) or 'none'})")
    values = parse_values(vals)
    for v in values:
        models.check_knobs({knob: v})
    deepest = max(values) if knob in models.DEPTH_KNOBS else 0
    over = [(f"{len(values)} points", f"max_points={ev.opt['max_points']}", f"--max_points={len(values)}")
            ] if len(values) > ev.opt['max_points'] else []
    over += [(f"depths up to {deepest}", f"max_depth={ev.opt['max_depth']}", f"--max_depth={deepest}")
             ] if deepest > ev.opt['max_depth'] else []
    if over:
        raise ConfigError(f"--sweep={ev.opt['sweep']} has " + ' and '.join(f"{a} (above {b})" for a, b, _ in over)
                          + f": pass {' '.join(c for _, _, c in over)} to run it anyway")
    split, rows = ev.opt['split'], []

    def table(done):
        return {'model': ev.name, 'split': split, 'protocol': ev.protocol(), 'knob': knob, 'values': values[:len(done)],
                **{k: [r[k] for r in done] for k in ('loss', 'perplexity', 'bits_per_token', 'bits_per_byte', 'tokens')}}
    partial = ev.outpath(f'sweep_{knob}.partial.json')
    t0 = time.time()
    for i, v in enumerate(values):
        r = ev.score(split, **{knob: v})
        rows.append(r)
        left = (time.time() - t0) / (i + 1) * (len(values) - i - 1)
        print(f"[{i + 1}/{len(values)}] {knob}={v}: loss {r['loss']:.4f}, perplexity {r['perplexity']:.3f}"
              + (f" (about {left:.0f} s to go)" if 0 < left < 120 else f" (about {left / 60:.0f} min to go)" if left
                 else ''), flush=True)
        if i + 1 < len(values):   # each point as it is measured: a stopped sweep keeps what it has, beside the last whole one
            write_json(partial, {**table(rows), 'partial': True})
    res = table(rows)
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if numeric and (knob == 'num_recur' or ev.opt['fit']):
        try:
            f = fit_exp_decay(values, res['loss'])
            res['fit'] = f
            print(f"fit L(T) = L_inf + Z exp(-z T): L_inf {f['L_inf']:.4f}, Z {f['Z']:.4f}, z {f['z']:.4f}, "
                  f"rmse {f['rmse']:.2e} ({f['points']} points)")
            if f['unidentified']:
                print(f"the curve cannot be identified from these points ({f['unidentified']}): the constants "
                      f"describe this sweep, they are not the model's L_inf, Z and z")
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
    if os.path.exists(partial):
        os.remove(partial)
    return res


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
    return {'L_inf': float(L_inf), 'Z': float(Z), 'z': z, 'rmse': math.sqrt(err / len(T)), 'points': int(len(T)),
            'unidentified': unidentified(T, z)}


def unidentified(T, z):
    """Why L_inf, Z and z cannot be read off these points ('' when they can). Three constants need
    points to spare, and the decay length 1/z must lie inside the swept range: shorter than the
    first step, only the first point sees the decay (any larger z with a larger Z fits it as well);
    longer than the range, the curve is a line whose floor L_inf is not seen."""
    steps = np.diff(np.unique(T))
    why = []
    if len(T) < 6:
        why.append(f"{len(T)} points for 3 constants (6 at least)")
    if len(steps) and 1 / z < steps.min():
        why.append(f"the decay length 1/z = {1 / z:.2g} is shorter than the first step {steps.min():g}")
    if 1 / z > T.max() - T.min():
        why.append(f"the decay length 1/z = {1 / z:.3g} is longer than the swept range")
    return '; '.join(why)
