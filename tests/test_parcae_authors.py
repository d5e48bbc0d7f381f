"""pretrained.from_authors against the authors' own code: tests/fixtures/parcae_authors/ holds two tiny
models their code built, saved (config.json, model.pt) and ran (expected.pt: logits at num_recur 1,
2, 4 and the h_0 each run drew): released/ of the released models' structure, variant/ the other
mapped paths (SwiGLU, linear injection, untied head, value-embedding gates apart from the tables).
tools/parcae_fixture.py rebuilds them from a checkout of their repository. Nothing here needs their
package."""
import json
import os

import pytest
import torch

from parcae import parcae_reference
from pretrained import from_authors

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures', 'parcae_authors')


def load(name):
    folder = os.path.join(FIXTURE, name)
    with open(os.path.join(folder, 'config.json')) as f:
        config = json.load(f)
    state_dict = torch.load(os.path.join(folder, 'model.pt'), map_location='cpu', weights_only=True)
    expected = torch.load(os.path.join(folder, 'expected.pt'), map_location='cpu', weights_only=True)
    return config, state_dict, expected


@pytest.fixture(scope='module')
def release():
    return load('released')


def tolerance(model, T, scale):
    """Both sides compute the same function in float32 in a different order of operations. A dot
    product of length n is off by at most n u relatively (u = 2^-24); a logit goes through D = L_P +
    T L_R + L_C blocks of 4 matmuls each (q/k/v, attention output, MLP in, MLP out), inner length
    n <= max(d, d_ff), and to first order those errors add: 4 D n u of the logits' scale."""
    cfg = model.config
    D = cfg.n_prelude + T * cfg.n_recur_layers + cfg.n_coda
    return 4 * D * max(cfg.n_embd, cfg.d_ff) * 2.0 ** -24 * scale


@pytest.mark.parametrize('T', [1, 2, 4])
@pytest.mark.parametrize('name', ['released', 'variant'])
def test_their_weights_give_their_logits_at_each_depth(name, monkeypatch, T):
    config, state_dict, expected = load(name)
    model = from_authors(config, state_dict).eval()
    idx, h0, want = expected['idx'], expected[f'h0_{T}'], expected[f'logits_{T}']
    tol = tolerance(model, T, want.abs().max().item())
    with torch.no_grad():
        ref = parcae_reference(model, idx, T, h0=h0)
        monkeypatch.setattr(model, '_initial_state', lambda B, L, device, offset=0, **_: h0[:, offset:offset + L].clone())
        fwd, _ = model(idx, num_recur=T)
        state = model.decode_init(idx.shape[0], idx.device, num_recur=T)
        dec = torch.stack([model.decode_step(idx[:, t], state)[0] for t in range(idx.shape[1])], dim=1)
    for got in (ref, fwd, dec):   # the paper's loop, the fast path, the KV-cached decode
        assert (got - want).abs().max().item() < tol
    with torch.no_grad():  # their h_0 is a draw: the comparison holds only because the same one is fed
        assert (parcae_reference(model, idx, T, h0=h0.flip(0)) - want).abs().max().item() > 100 * tol


@pytest.mark.parametrize('field, value', [('frobnicate', 1), ('logit_softcap', 15.0), ('num_key_value_heads', 1),
                                          ('nonlin_name', 'GELU'), ('norm_class_name', 'LayerNorm'),
                                          ('recurrent_embedding_dimension', 64), ('state_init', 'zero')])
def test_a_config_field_it_cannot_map_is_refused_by_name(release, field, value):
    config, state_dict, _ = release
    with pytest.raises(ValueError, match=field):
        from_authors({**config, field: value}, state_dict)


def test_a_missing_config_field_is_refused_by_name(release):
    config, state_dict, _ = release
    with pytest.raises(ValueError, match='prelude_norm'):
        from_authors({k: v for k, v in config.items() if k != 'prelude_norm'}, state_dict)


def test_an_unknown_or_missing_or_misshapen_key_is_refused_by_name(release):
    config, state_dict, _ = release
    with pytest.raises(ValueError, match=r'transformer\.coda\.0\.attn\.extra'):
        from_authors(config, {**state_dict, 'transformer.coda.0.attn.extra': torch.zeros(1)})
    with pytest.raises(ValueError, match=r"'C\.weight'"):
        from_authors(config, {k: v for k, v in state_dict.items() if k != 'transformer.C.weight'})
    with pytest.raises(ValueError, match=r'transformer\.adapter\.B'):
        from_authors(config, {**state_dict, 'transformer.adapter.B': torch.zeros(3, 3)})
