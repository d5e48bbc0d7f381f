"""The statistics the tables rest on: mean and sd over seeds, the two-sd verdict, Wilson intervals, the
rate bracket, and Table 12's four forms of L(T) fit to a test-time depth curve."""
import math

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


def verdict(ref, run, higher=False):
    """ref against run (rows with mean and sd over seeds): 'holds' where ref is better by more than two of
    the larger sd, 'tie' within them, 'run lower' (or higher) beyond them, 'one seed' where a side has no sd.
    higher: the metric is better high (an accuracy), else low (a loss)."""
    sd = float('nan') if math.isnan(ref['sd']) or math.isnan(run['sd']) else max(ref['sd'], run['sd'])
    gap = (ref['mean'] - run['mean']) * (1 if higher else -1)     # > 0: ref better
    return ('one seed' if math.isnan(sd) else 'holds' if gap > 2 * sd else 'tie' if gap >= -2 * sd
            else 'run higher' if higher else 'run lower')


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
