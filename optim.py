"""
The optimizers and the learning-rate schedule train.py builds, apart from the trainer as nanochat
keeps them: AdamW, or Muon for the hidden matrices beside AdamW for the rest, each as torch has it
or as the Parcae paper's recipes change it (ParcaeMuon: Section Q.2's Muon; StableAdamW: the RDM's
Adam of Q.1), and the schedules cosine, constant and trapezoid.
"""
import math

import torch

from parcae import ParcaeMuon, StableAdamW

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
