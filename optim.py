"""
The optimizers and the learning-rate schedule train.py builds, apart from the trainer as nanochat
keeps them: AdamW, or Muon for the hidden matrices beside AdamW for the rest, each as torch has it
or as the Parcae paper's recipes change it (ParcaeMuon: Section Q.2's Muon; StableAdamW: the RDM's
Adam of Q.1), and the schedules cosine, constant and trapezoid.
"""
import math

import torch

# Polar Express (Amsel et al. 2025, arXiv 2505.16932): the odd quintic a x + b x^3 + c x^5 of each
# of the first five iterations, from the paper (optimal for singular values in [1e-3, 1], with its
# safety margin), as in nanochat and Parcae's code
POLAR_EXPRESS = ((8.156554524902461, -22.48329292557795, 15.878769915207462),
                 (4.042929935166739, -2.808917465908714, 0.5000178451051316),
                 (3.8916678022926607, -2.772484153217685, 0.5060648178503393),
                 (3.285753657755655, -2.3681294933425376, 0.46449024233003106),
                 (2.3465413258596377, -1.7097828382687081, 0.42323551169305323))


def polar_express(G, steps=5):
    """About U V^T for G = U S V^T: each iteration maps every singular value s to a s + b s^3 + c s^5,
    a new (a, b, c) each time (Newton-Schulz, as in torch.optim.Muon, repeats one). bf16 on CUDA,
    float32 elsewhere (bf16 matmuls are slow on a CPU)."""
    X = G.to(torch.bfloat16 if G.is_cuda else torch.float32)
    tall = X.size(-2) > X.size(-1)
    if tall:  # X X^T is then the smaller Gram matrix
        X = X.mT
    X = X / (X.norm(dim=(-2, -1), keepdim=True) * 1.02 + 1e-6)  # every singular value below 1
    for a, b, c in POLAR_EXPRESS[:steps]:
        A = X @ X.mT
        X = a * X + (b * A + c * A @ A) @ X
    return X.mT if tall else X


class ParcaeMuon(torch.optim.Optimizer):
    """Muon as Parcae trains its Transformer comparison (Section Q.2; momentum, scaling and decay as
    the authors' code): Nesterov momentum (an EMA), Polar Express in place of Newton-Schulz, a
    factored variance reduction (AdaMuon: the orthogonalised update O is divided, along its longer
    side, by the root of a running mean of its squares, one number per row or column, then rescaled
    to O's Frobenius norm), lr * sqrt(max(1, rows / cols)) as torch.optim.Muon, and cautious weight
    decay (Chen et al.: a weight decays only where the update has its sign)."""

    def __init__(self, params, lr=0.02, momentum=0.95, beta2=0.95, weight_decay=0.0, ns_steps=5):
        super().__init__(params, dict(lr=lr, momentum=momentum, beta2=beta2, weight_decay=weight_decay,
                                      ns_steps=ns_steps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            mu, lr, wd = group['momentum'], group['lr'], group['weight_decay']
            for p in group['params']:
                if p.grad is None:
                    continue
                rows, cols = p.shape
                along = -1 if rows >= cols else -2   # mean over the shorter side: one v per long-side index
                state = self.state[p]
                if not state:
                    state['momentum_buffer'] = torch.zeros_like(p)
                    state['second_moment'] = torch.zeros((rows, 1) if along == -1 else (1, cols), device=p.device)
                buf, v = state['momentum_buffer'], state['second_moment']
                buf.lerp_(p.grad, 1 - mu)
                O = polar_express(p.grad.lerp(buf, mu), group['ns_steps']).float()
                v.lerp_(O.square().mean(dim=along, keepdim=True), 1 - group['beta2'])
                U = O * v.clamp_min(1e-10).rsqrt()
                U *= O.norm() / U.norm().clamp_min(1e-10)
                U += wd * p * (U * p >= 0)
                p.sub_(U.to(p.dtype), alpha=lr * max(1.0, rows / cols) ** 0.5)


class StableAdamW(torch.optim.Optimizer):
    """AdamW with the RDM recipe's two changes (Parcae Q.1, after Geiping et al.), each switchable:
    update clipping (Wortsman et al. 2023: a tensor's lr is divided by max(1, RMS(g / sqrt(v_hat))),
    so a gradient far above its running second moment takes no outsized step) and no epsilon, by
    Adam-atan2 (Everett et al. 2024: atan2(m_hat, sqrt(v_hat)), bounded by pi/2, 0 where m = v = 0).
    Decay is decoupled, lr * weight_decay, as torch's AdamW."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0, update_clipping=True,
                 atan2=True):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      update_clipping=update_clipping, atan2=atan2))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            (b1, b2), lr = group['betas'], group['lr']
            for p in group['params']:
                if p.grad is None:
                    continue
                g, state = p.grad, self.state[p]
                if not state:
                    state.update(step=0, exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
                state['step'] += 1
                t = state['step']
                m_hat = state['exp_avg'].lerp_(g, 1 - b1) / (1 - b1 ** t)
                v_hat = state['exp_avg_sq'].lerp_(g.square(), 1 - b2) / (1 - b2 ** t)
                step_lr = lr
                if group['update_clipping']:  # v_hat = 0 only where g = 0: that term is 0
                    rms = (g.square() / v_hat.clamp_min(torch.finfo(v_hat.dtype).tiny)).mean().sqrt()
                    step_lr = lr / rms.clamp_min(1.0)
                if group['atan2']:
                    update = torch.atan2(m_hat, v_hat.sqrt())
                else:
                    update = m_hat / (v_hat.sqrt() + group['eps'])
                p.mul_(1 - step_lr * group['weight_decay'])
                p.sub_(step_lr * update)



def make_optimizers(model, cfg, device_type):
    """AdamW (+ Muon): the model's own groups when it has optim_groups(), else by shape. The
    recipe keys cfg lacks (bench.py, tests) take train.py's defaults."""
    from train import DEFAULTS   # here, not at the top: train.py imports this module
    cfg = {**DEFAULTS, **cfg}
    if hasattr(model, 'optim_groups'):
        groups = model.optim_groups(cfg['weight_decay'])
    else:
        embed = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
        muon = [] if cfg['optimizer'] != 'muon' else [
            m.weight for name, m in model.named_modules()
            if isinstance(m, torch.nn.Linear) and id(m.weight) not in embed and 'lm_head' not in name]
        mids = {id(p) for p in muon}
        rest = [p for p in model.parameters() if id(p) not in mids]
        groups = [{'params': [p for p in rest if p.dim() >= 2], 'weight_decay': cfg['weight_decay']},
                  {'params': [p for p in rest if p.dim() < 2], 'weight_decay': 0.0},
                  {'params': muon, 'optimizer': 'muon'}]
    for g in groups:  # frozen parameters take no step; optimizer='adamw' overrules a model's Muon groups
        g['params'] = [p for p in g['params'] if p.requires_grad]
        if cfg['optimizer'] != 'muon':
            g['optimizer'] = 'adamw'
    adamw = [g for g in groups if g.get('optimizer', 'adamw') == 'adamw' and g['params']]
    muon = [g for g in groups if g.get('optimizer', 'adamw') == 'muon' and g['params']]
    betas = (cfg['beta1'], cfg['beta2'])
    if cfg['update_clipping'] or cfg['adam_atan2']:
        opts = [StableAdamW(adamw, lr=cfg['learning_rate'], betas=betas, eps=cfg['eps'],
                            update_clipping=cfg['update_clipping'], atan2=cfg['adam_atan2'])]
    else:
        opts = [torch.optim.AdamW(adamw, lr=cfg['learning_rate'], betas=betas, eps=cfg['eps'], fused=device_type == 'cuda')]
    if muon:
        kw = dict(lr=cfg['muon_lr'] or cfg['learning_rate'], momentum=muon_momentum(0, cfg),
                  weight_decay=cfg['muon_weight_decay'])
        if cfg['muon_variant'] == 'parcae':
            opts.append(ParcaeMuon(muon, beta2=cfg['muon_beta2'], **kw))
        else:
            opts.append(torch.optim.Muon(muon, **kw))
    return opts


def lr_multiplier(it, cfg):
    """Learning rate at iteration it as a fraction of the peak (min_lr is scaled alike)."""
    warm, floor = cfg['warmup_iters'], cfg['min_lr'] / cfg['learning_rate']
    if it < warm:
        return (it + 1) / (warm + 1)
    if cfg['schedule'] == 'constant':
        return 1.0
    if cfg['schedule'] == 'trapezoid':
        start = cfg['max_iters'] * (1 - cfg['cooldown_frac'])
        if it < start:
            return 1.0
        return 1.0 - (1.0 - floor) * min(1.0, (it - start) / max(1.0, cfg['max_iters'] - start))
    decay = cfg['lr_decay_iters'] or cfg['max_iters']
    if it >= decay:
        return floor
    ratio = (it - warm) / max(1, decay - warm)
    return floor + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (1.0 - floor)


def muon_momentum(it, cfg):
    """muon_momentum_start rising linearly to muon_momentum over muon_momentum_warmup iterations
    (nanochat; Parcae's code: 0.85 -> 0.95 over 300), then constant."""
    frac = min(1.0, it / cfg['muon_momentum_warmup']) if cfg['muon_momentum_warmup'] > 0 else 1.0
    return cfg['muon_momentum_start'] + frac * (cfg['muon_momentum'] - cfg['muon_momentum_start'])


def set_schedule(opts, it, cfg):
    """Learning rates (and Muon's decaying weight decay and warming momentum) at iteration it, from
    the config alone, so a resumed run may change them. A group may carry an 'lr_scale' (optim_groups)."""
    mult = lr_multiplier(it, cfg)
    for k, opt in enumerate(opts):
        peak = cfg['learning_rate'] if k == 0 else (cfg['muon_lr'] or cfg['learning_rate'])
        for g in opt.param_groups:
            g['lr'] = peak * mult * g.get('lr_scale', 1.0)
            if k == 1:
                decay = max(0.0, 1.0 - it / cfg['max_iters']) if cfg['muon_wd_decay'] else 1.0
                g['weight_decay'] = cfg['muon_weight_decay'] * decay
                g['momentum'] = muon_momentum(it, cfg)
    return mult * cfg['learning_rate']
