"""The statistics the tables rest on: mean and sd over seeds, the verdict (the two-sd rule, Welch's t-test
and a bootstrap interval of the gap, all three), Wilson intervals, the rate bracket, and Table 12's four
forms of L(T) fit to a test-time depth curve."""
import math

import numpy as np
import torch


def mean_sd(xs):
    m = sum(xs) / len(xs)
    return m, (math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else float('nan'))


def ranked(scores):
    """The rates of {rate: loss} from the lowest loss up, a diverged (NaN) one last, a tie to the lower rate."""
    return sorted(scores, key=lambda lr: (scores[lr] if math.isfinite(scores[lr]) else math.inf, lr))


def bracket(lrs, loss, most=7):
    """A grid of rates widened by 2x at the edge where the lowest loss lies, until it lies inside (or the
    grid has `most` rates); loss(lr) trains what it needs. Returns (the rates, the best)."""
    lrs = sorted(lrs)
    while True:
        got = {lr: loss(lr) for lr in lrs}
        best = ranked(got)[0]
        if best not in (lrs[0], lrs[-1]) or len(lrs) >= most:
            return lrs, best
        lrs = sorted(lrs + [best / 2 if best == lrs[0] else best * 2])


def betacf(a, b, x, eps=1e-15, most=300):
    """The continued fraction of the incomplete beta function, by the modified Lentz method (Numerical
    Recipes' betacf)."""
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, most + 1):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + num * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < eps:
            return h
    raise ArithmeticError(f'betacf({a}, {b}, {x}) did not converge in {most} steps')


def betai(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0 or x >= 1:
        return float(x >= 1)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):      # the fraction converges fast on this side; the other by symmetry
        return front * betacf(a, b, x) / a
    return 1 - front * betacf(b, a, 1 - x) / b


def t_two_sided(t, df):
    """P(|T| >= |t|) for Student's t with df degrees of freedom (df need not be whole)."""
    return 0.0 if math.isinf(t) else betai(df / 2, 0.5, df / (df + t * t))


def seed_row(xs):
    """A row of one run's values over seeds, as verdict() and tests() read it."""
    m, sd = mean_sd(xs)
    return {'mean': m, 'sd': sd, 'xs': list(xs)}


def seeds_of(row):
    return row['xs'] if 'xs' in row else row['losses']


def welch(a, b):
    """Welch's t-test of mean(a) - mean(b): (t, df by Welch-Satterthwaite, two-sided p). Both sides
    without spread: t is infinite (p 0) where the means differ, 0 (p 1) where they do not."""
    (ma, sa), (mb, sb) = mean_sd(a), mean_sd(b)
    va, vb = sa * sa / len(a), sb * sb / len(b)
    if va + vb == 0:
        return (math.copysign(math.inf, ma - mb) if ma != mb else 0.0), math.nan, float(ma == mb)
    t = (ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va * va / (len(a) - 1) + vb * vb / (len(b) - 1))
    return t, df, t_two_sided(t, df)


def bootstrap_gap(a, b, n=10_000, seed=0, level=0.95):
    """The percentile bootstrap interval of mean(a) - mean(b): each side resampled with replacement n
    times from a fixed seed, so a table rebuilds to the byte."""
    rng = np.random.Generator(np.random.PCG64(seed))
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    gaps = (a[rng.integers(0, len(a), (n, len(a)))].mean(1) - b[rng.integers(0, len(b), (n, len(b)))].mean(1))
    lo, hi = np.percentile(gaps, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def tests(ref, run):
    """The tests beside the two-sd rule, ref - run: {'t', 'df', 'p', 'lo', 'hi'}; None where a side has one seed."""
    a, b = seeds_of(ref), seeds_of(run)
    if len(a) < 2 or len(b) < 2:
        return None
    t, df, p = welch(a, b)
    return dict(zip(('t', 'df', 'p', 'lo', 'hi'), (t, df, p, *bootstrap_gap(a, b))))


def tests_cell(ref, run, scale=1.0, digits=3):
    """Welch's t, df and p and the bootstrap interval of ref - run (in the table's unit: scale, digits), as
    a table cell; empty where a side has one seed."""
    w = tests(ref, run)
    if w is None:
        return ''
    df = 'df -' if math.isnan(w['df']) else f"df {w['df']:.1f}"
    return (f"t {w['t']:+.2f}, {df}, p {w['p']:.3f}; "
            f"[{scale * w['lo']:+.{digits}f}, {scale * w['hi']:+.{digits}f}]")


ALPHA = 0.05
TESTS_HEAD = 'Welch t, df, p; 95% bootstrap interval of the gap'


def verdict(ref, run, higher=False):
    """ref against run (rows with mean and sd over seeds, and the seeds' values): 'holds' where ref is better
    by more than two of the larger sd AND Welch's two-sided p < 0.05 AND the bootstrap interval of the gap
    excludes 0; 'run lower' (or higher) where all three say the same the other way; 'tie' where none
    passes; 'not shown: ...' naming which pass and which not where they disagree; 'one seed' where a side
    has no sd. higher: the metric is better high (an accuracy), else low (a loss)."""
    if math.isnan(ref['sd']) or math.isnan(run['sd']):
        return 'one seed'
    sign = 1 if higher else -1
    gap = (ref['mean'] - run['mean']) * sign     # > 0: ref better
    two_sd = abs(gap) > 2 * max(ref['sd'], run['sd'])
    w = tests(ref, run)
    welch_ok, boot_ok = w['p'] < ALPHA, w['lo'] > 0 or w['hi'] < 0
    if two_sd and welch_ok and boot_ok:
        return 'holds' if gap > 0 else 'run higher' if higher else 'run lower'
    if not (two_sd or welch_ok or boot_ok):
        return 'tie'
    side = '' if gap > 0 else f" ({'run higher' if higher else 'run lower'})"
    parts = [('2-sd rule', two_sd, 'inside two sd'), (f"Welch p {w['p']:.3f}", welch_ok, f"Welch p {w['p']:.3f}"),
             ('bootstrap interval', boot_ok, 'bootstrap interval holds 0')]
    passed = [name for name, ok, _ in parts if ok]
    return (f"not shown{side}: {' and '.join(passed)} pass{'es' if len(passed) == 1 else ''}, "
            + ', '.join(why for _, ok, why in parts if not ok))


def verdict_p(ref, run, higher=False):
    """verdict(), with Welch's p beside it where the verdict does not name it already (and both sides have spread)."""
    v, w = verdict(ref, run, higher), tests(ref, run)
    return v + (f" (Welch p {w['p']:.3f})" if w and 'Welch p' not in v else '')


def no_gap(v):
    """A verdict that shows no gap either way (a tie, or the rule's parts disagreeing)."""
    return v == 'tie' or v.startswith('not shown')


def wilson(k, n, z=1.96):
    """The Wilson score interval (95%) of k successes in n trials; (nan, nan) when n is 0."""
    if n == 0:
        return float('nan'), float('nan')
    p, zz = k / n, z * z / n
    mid, half = (p + zz / 2) / (1 + zz), z * math.sqrt(p * (1 - p) / n + zz / (4 * n)) / (1 + zz)
    return max(0.0, mid - half), min(1.0, mid + half)


# Table 12's four forms of L(T); (L_inf, Z, z) = exp of the free parameters, so each stays positive
FORMS = {
    'L_inf + Z exp(-zT)': lambda T, a, b, c: a.exp() + b.exp() * torch.exp(-c.exp() * T),
    'L_inf + Z (1+T)^-z': lambda T, a, b, c: a.exp() + b.exp() * (1 + T) ** -c.exp(),
    'L_inf + Z T^-z': lambda T, a, b, c: a.exp() + b.exp() * T ** -c.exp(),
    'Z T^-z': lambda T, a, b, c: b.exp() * T ** -c.exp(),
}


def huber(r, delta=1e-3):   # Hoffmann et al.'s delta, on log loss (Parcae Appendix K)
    return torch.where(r.abs() <= delta, 0.5 * r ** 2, delta * (r.abs() - 0.5 * delta))


def fit_form(form, T, L):
    """Parameters of one form fit to points (T, L): the summed Huber loss of log prediction against
    log loss, minimised by L-BFGS from a grid of starts (the paper: random restarts)."""
    T, logL = torch.tensor(T, dtype=torch.float64), torch.tensor(L, dtype=torch.float64).log()
    f, best = FORMS[form], (math.inf, None)
    for a0 in (math.log(min(L)) + d for d in (-0.1, -0.01, -0.001)):
        for b0 in (math.log(max(max(L) - min(L), 1e-6)), math.log(max(L))):
            for c0 in (-2.0, -0.5, 0.5, 1.5):
                p = torch.tensor([a0, b0, c0], dtype=torch.float64, requires_grad=True)
                opt = torch.optim.LBFGS([p], max_iter=500, tolerance_grad=1e-14, tolerance_change=1e-16,
                                        line_search_fn='strong_wolfe')

                def closure():
                    opt.zero_grad()
                    loss = huber(f(T, *p).log() - logL).sum()
                    loss.backward()
                    return loss
                opt.step(closure)
                with torch.no_grad():
                    loss = huber(f(T, *p).log() - logL).sum().item()
                if math.isfinite(loss) and loss < best[0]:
                    best = (loss, p.detach())
    return best[1]


def fit_forms(T, L, mu):
    """Table 12 for one curve: each form's mean Huber loss per point, fit on every T ('in') and fit on
    T <= mu, scored on T > mu ('extrapolation')."""
    res = {}
    for form, f in FORMS.items():
        def score(p, ts, ls):
            with torch.no_grad():
                r = f(torch.tensor(ts, dtype=torch.float64), *p).log() - torch.tensor(ls, dtype=torch.float64).log()
            return huber(r).mean().item()
        lo = [(t, l) for t, l in zip(T, L) if t <= mu]
        hi = [(t, l) for t, l in zip(T, L) if t > mu]
        res[form] = {'in': score(fit_form(form, T, L), T, L),
                     'extrapolation': score(fit_form(form, *zip(*lo)), *zip(*hi))}
    return res
