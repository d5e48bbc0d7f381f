"""The training recipes that decide the papers' comparisons: Parcae's scaled-zero init
for its GPT baselines, Parcae's Muon, the RDM's Adam, the workspace paper's FP32, weight decay and
TinyStories cap."""
import json
import math
import os

import numpy as np
import pytest
import torch

import parcae
import prepare_data
import models
import train
from conftest import read_log, run_script, train_script
from baselines import GPT, GPTConfig
from workspace import VARIANTS, Workspace, WorkspaceConfig


def tiny_gpt(**kw):
    cfg = dict(block_size=16, vocab_size=50, n_layer=2, n_head=4, n_embd=64, pos='rope', norm='rms',
               mlp='relu2', qk_norm=True, value_embeds=True, fused_qkv=False, bias=False, init='scaled_zero')
    return GPT(GPTConfig(**{**cfg, **kw}))


# ----------------------------------------------------------------------------- scaled-zero init
def test_scaled_zero_init_matches_table18():
    torch.manual_seed(0)
    m = tiny_gpt(bias=True, n_embd=128, n_head=4, vocab_size=512)
    std = math.sqrt(2 / (5 * 128))
    zero = ('attn.c_proj.weight', 'mlp.c_proj.weight', 've_gate.weight')
    for name, p in m.named_parameters():
        if name.endswith(zero) or name.endswith('.bias'):
            assert torch.count_nonzero(p) == 0, name
        elif p.ndim == 2:   # matrices, the token embedding and the value embeddings alike
            assert abs(p.std().item() / std - 1) < 0.1, name     # truncation at 3 std shrinks it by 1.3%
            assert p.abs().max().item() <= 3 * std + 1e-7, name
        else:
            assert torch.equal(p, torch.ones_like(p)), name       # RMSNorm weights
    assert len(m.value_embeds) == 1


def test_scaled_zero_blocks_start_as_identities():
    # zero output projections: every block adds nothing at init, so the logits are the embedding's
    torch.manual_seed(0)
    m = tiny_gpt()
    x = torch.randint(0, 50, (2, 16))
    direct = m.lm_head(m.transformer.ln_f(m.transformer.wte(x)))
    torch.testing.assert_close(m(x)[0], direct)
    gpt2 = tiny_gpt(init='gpt2')   # nanoGPT's init: N(0, 0.02), blocks not identities
    assert abs(gpt2.transformer.wte.weight.std().item() - 0.02) < 0.002
    assert not torch.allclose(gpt2(x)[0], gpt2.lm_head(gpt2.transformer.ln_f(gpt2.transformer.wte(x))))


def test_gpt_init_is_checked():
    with pytest.raises(ValueError, match='init must be gpt2|scaled_zero'):
        GPTConfig(init='xavier')


# ----------------------------------------------------------------------------- Parcae's Muon
def polar_reference(G, steps=5):
    """The same polynomials applied to the singular values of G directly (float64 SVD)."""
    U, S, Vh = torch.linalg.svd(G.double(), full_matrices=False)
    s = S / (G.double().norm() * 1.02 + 1e-6)
    for a, b, c in parcae.POLAR_EXPRESS[:steps]:
        s = a * s + b * s ** 3 + c * s ** 5
    return U @ torch.diag(s) @ Vh


@pytest.mark.parametrize('shape', [(48, 24), (24, 48), (32, 32)])
def test_polar_express_orthogonalises(shape):
    torch.manual_seed(0)
    G = torch.randn(*shape)
    O = parcae.polar_express(G)
    assert O.shape == G.shape
    sv = torch.linalg.svdvals(O.double())
    assert sv.min() > 0.85 and sv.max() < 1.15          # about U V^T ...
    ns = torch.linalg.svdvals(G.double() / G.norm())      # ... where fixed Newton-Schulz leaves s in ~[0.68, 1.2]
    for _ in range(5):
        ns = 3.4445 * ns - 4.775 * ns ** 3 + 2.0315 * ns ** 5
    assert (sv - 1).abs().max() < (ns - 1).abs().max()
    torch.testing.assert_close(O.double(), polar_reference(G), atol=2e-4, rtol=0)


def muon_reference(p, grads, lr, mu, wd, beta2):
    """ParcaeMuon written out (float64, SVD, loops) for steps of the given gradients."""
    p, buf = p.double().clone(), torch.zeros_like(p, dtype=torch.float64)
    rows, cols = p.shape
    n = rows if rows >= cols else cols
    v = torch.zeros(n, dtype=torch.float64)
    for g in grads:
        g = g.double()
        buf = mu * buf + (1 - mu) * g
        O = polar_reference((1 - mu) * g + mu * buf)
        lines = [O[i] for i in range(rows)] if rows >= cols else [O[:, j] for j in range(cols)]
        v = beta2 * v + (1 - beta2) * torch.stack([(line ** 2).mean() for line in lines])
        U = torch.stack([line / v[k].sqrt() for k, line in enumerate(lines)], dim=0 if rows >= cols else 1)
        U = U * O.norm() / U.norm()
        step = lr * math.sqrt(max(1, rows / cols))
        new = p.clone()
        for i in range(rows):
            for j in range(cols):
                decay = wd * p[i, j] if U[i, j] * p[i, j] >= 0 else 0.0   # cautious weight decay
                new[i, j] = p[i, j] - step * (U[i, j] + decay)
        p = new
    return p


@pytest.mark.parametrize('shape', [(12, 6), (6, 12)])
def test_parcae_muon_equals_reference(shape):
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(*shape))
    grads = [torch.randn(*shape) for _ in range(3)]
    expect = muon_reference(w.detach(), grads, lr=0.05, mu=0.9, wd=0.3, beta2=0.8)
    opt = parcae.ParcaeMuon([w], lr=0.05, momentum=0.9, weight_decay=0.3, beta2=0.8)
    for g in grads:
        w.grad = g.clone()
        opt.step()
    torch.testing.assert_close(w.detach().double(), expect, atol=2e-4, rtol=0)


def muon_per_matrix(params, grads, lr, mu, wd, beta2, steps=5):
    """ParcaeMuon one matrix at a time (as it was written before batching by shape), in float32."""
    state = {}
    for gs in grads:
        for p, g in zip(params, gs):
            rows, cols = p.shape
            along = -1 if rows >= cols else -2
            if p not in state:
                state[p] = (torch.zeros_like(p), torch.zeros((rows, 1) if along == -1 else (1, cols)))
            buf, v = state[p]
            buf.lerp_(g, 1 - mu)
            O = parcae.polar_express(g.lerp(buf, mu), steps).float()
            v.lerp_(O.square().mean(dim=along, keepdim=True), 1 - beta2)
            U = O * v.clamp_min(1e-10).rsqrt()
            U *= O.norm() / U.norm().clamp_min(1e-10)
            U += wd * p * (U * p >= 0)
            p.sub_(U.to(p.dtype), alpha=lr * max(1.0, rows / cols) ** 0.5)
    return state


def test_parcae_muon_batched_by_shape_equals_per_matrix():
    # tall, wide and square matrices, several of each shape, one without a gradient; the batched
    # matmuls and norms sum in another order than the per-matrix ones: float32 rounding (eps
    # 1.2e-7), grown over 5 polar iterations and 4 steps to ~1e-6 at worst (measured 2e-7, most
    # matrices bit-equal on a CPU): rtol 1e-5, atol 1e-6 on entries of size ~1
    torch.manual_seed(0)
    shapes = [(12, 6), (6, 12), (8, 8), (12, 6), (8, 8), (6, 12), (8, 8), (5, 7)]
    ws = [torch.nn.Parameter(torch.randn(*s)) for s in shapes]
    idle = torch.nn.Parameter(torch.randn(8, 8))
    grads = [[torch.randn(*s) for s in shapes] for _ in range(4)]
    ref = [w.detach().clone() for w in ws]
    ref_state = muon_per_matrix(ref, grads, lr=0.05, mu=0.9, wd=0.3, beta2=0.8)
    opt = parcae.ParcaeMuon([*ws, idle], lr=0.05, momentum=0.9, weight_decay=0.3, beta2=0.8)
    idle_before = idle.detach().clone()
    for gs in grads:
        for w, g in zip(ws, gs):
            w.grad = g.clone()
        opt.step()
    for w, r in zip(ws, ref):
        torch.testing.assert_close(w.detach(), r, rtol=1e-5, atol=1e-6)
        buf, v = ref_state[r]
        torch.testing.assert_close(opt.state[w]['momentum_buffer'], buf, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(opt.state[w]['second_moment'], v, rtol=1e-5, atol=1e-6)
    assert torch.equal(idle.detach(), idle_before) and idle not in opt.state


def test_muon_momentum_warms_up_and_weight_decay_falls():
    cfg = {**train_script().DEFAULTS, 'optimizer': 'muon', 'muon_variant': 'parcae', 'muon_momentum_warmup': 300,
           'muon_weight_decay': 0.2, 'muon_wd_decay': True, 'max_iters': 1000, 'learning_rate': 8e-3,
           'schedule': 'trapezoid', 'warmup_iters': 0, 'min_lr': 0.0}
    opts = train.configure_optimizers(tiny_gpt(), cfg, 'cpu')
    assert isinstance(opts[1], parcae.ParcaeMuon) and type(opts[0]) is torch.optim.AdamW
    got = {}
    for it in (0, 150, 300, 900):
        train_script().set_schedule(opts, it, cfg)
        got[it] = (opts[1].param_groups[0]['momentum'], opts[1].param_groups[0]['weight_decay'])
    assert [round(mu, 6) for mu, _ in got.values()] == [0.85, 0.9, 0.95, 0.95]
    assert got[900][1] == pytest.approx(0.02)
    assert isinstance(train.configure_optimizers(tiny_gpt(), {**cfg, 'muon_variant': 'torch'}, 'cpu')[1], torch.optim.Muon)


# ----------------------------------------------------------------------------- the RDM's Adam
def adam_reference(p, grads, lr, b1, b2, wd, clip, atan2, eps=1e-8):
    p, m, v = p.double().clone(), torch.zeros_like(p, dtype=torch.float64), torch.zeros_like(p, dtype=torch.float64)
    for t, g in enumerate(grads, 1):
        g = g.double()
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        step = lr
        if clip:   # Wortsman et al.: RMS of g / sqrt(v_hat) over the tensor
            step = lr / max(1.0, math.sqrt(sum((gi * gi / vi).item() for gi, vi in zip(g.flatten(), v_hat.flatten())) / g.numel()))
        u = torch.atan2(m_hat, v_hat.sqrt()) if atan2 else m_hat / (v_hat.sqrt() + eps)
        p = p * (1 - step * wd) - step * u
    return p


@pytest.mark.parametrize('clip,atan2', [(True, True), (True, False), (False, True), (False, False)])
def test_stable_adamw_equals_reference(clip, atan2):
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(5, 4))
    w0 = w.detach().clone()
    grads = [torch.randn(5, 4) * s for s in (1.0, 1.0, 30.0, 1.0)]   # a spike on step 3: clipping acts
    expect = adam_reference(w.detach(), grads, lr=0.01, b1=0.9, b2=0.95, wd=0.1, clip=clip, atan2=atan2)
    opt = parcae.StableAdamW([w], lr=0.01, betas=(0.9, 0.95), weight_decay=0.1, update_clipping=clip, atan2=atan2)
    for g in grads:
        w.grad = g.clone()
        opt.step()
    torch.testing.assert_close(w.detach().double(), expect, atol=1e-6, rtol=1e-5)
    if not clip and not atan2:   # both off: torch's AdamW
        w2 = torch.nn.Parameter(w0)
        ref = torch.optim.AdamW([w2], lr=0.01, betas=(0.9, 0.95), weight_decay=0.1, eps=1e-8)
        for g in grads:
            w2.grad = g.clone()
            ref.step()
        torch.testing.assert_close(w.detach(), w2.detach())


def test_update_clipping_bounds_a_spike():
    # after a quiet start, a gradient 1000x larger moves the weight about one lr, not more
    w = torch.nn.Parameter(torch.zeros(64))
    opt = parcae.StableAdamW([w], lr=0.01, betas=(0.9, 0.999), update_clipping=True, atan2=False)
    for s in (1e-3, 1e-3, 1e-3, 1.0):
        before = w.detach().clone()
        w.grad = torch.full((64,), s)
        opt.step()
    assert (w.detach() - before).abs().max() < 0.011


def test_atan2_adam_has_no_epsilon_and_no_nan():
    # rows of an embedding that no batch touched: m = v = 0 gives a zero update, not 0/0
    w = torch.nn.Parameter(torch.ones(3, 2))
    opt = parcae.StableAdamW([w], lr=0.1, weight_decay=0.0, update_clipping=True, atan2=True)
    w.grad = torch.tensor([[1e-12, -1e-12], [0.0, 0.0], [2.0, 0.0]])
    opt.step()
    assert torch.isfinite(w).all()
    assert torch.equal(w.detach()[1], torch.ones(2)) and w.detach()[2, 1] == 1.0
    # a tiny gradient still takes a full step: no epsilon swamps it (m_hat / sqrt(v_hat) = 1)
    assert w.detach()[0, 0].item() == pytest.approx(1 - 0.1 * math.atan(1.0))


def test_rdm_keys_select_stable_adamw():
    cfg = {**train_script().DEFAULTS, 'update_clipping': True, 'adam_atan2': True}
    opt, = train.configure_optimizers(tiny_gpt(), cfg, 'cpu')
    assert isinstance(opt, parcae.StableAdamW)
    assert all(g['update_clipping'] and g['atan2'] for g in opt.param_groups)
    assert type(train.configure_optimizers(tiny_gpt(), train_script().DEFAULTS, 'cpu')[0]) is torch.optim.AdamW


def test_recipe_optimizers_resume_exactly():
    # a checkpoint's optimizer state continues the run as if never interrupted
    cfg = {**train_script().DEFAULTS, 'optimizer': 'muon', 'muon_variant': 'parcae', 'update_clipping': True,
           'adam_atan2': True, 'muon_weight_decay': 0.1}
    x = torch.randint(0, 50, (2, 16))

    def steps(model, opts, n):
        for _ in range(n):
            model(x, x)[1].backward()
            for o in opts:
                o.step()
                o.zero_grad()

    torch.manual_seed(0)
    a = tiny_gpt()
    b = tiny_gpt()
    b.load_state_dict(a.state_dict())
    opts_a = train.configure_optimizers(a, cfg, 'cpu')
    steps(a, opts_a, 4)
    opts_b = train.configure_optimizers(b, cfg, 'cpu')
    steps(b, opts_b, 2)
    saved = [o.state_dict() for o in opts_b]
    c = tiny_gpt()
    c.load_state_dict(b.state_dict())
    opts_c = train.configure_optimizers(c, cfg, 'cpu')
    for o, s in zip(opts_c, saved):
        o.load_state_dict(s)
    steps(c, opts_c, 2)
    for (n, p), q in zip(a.named_parameters(), c.parameters()):
        torch.testing.assert_close(p, q, msg=n)


def test_train_py_runs_the_recipes_and_resumes_exactly(char_data, tmp_path):
    common = [f'--data_dir={char_data}', '--dataset=tiny', '--n_layer=2', '--n_head=2', '--n_embd=32',
              '--block_size=32', '--batch_size=8', '--eval_iters=2', '--log_interval=1', '--compile=False',
              '--eval_interval=4', '--schedule=constant', '--warmup_iters=0', '--optimizer=muon',
              '--muon_variant=parcae', '--muon_momentum_warmup=6', '--muon_weight_decay=0.1',
              '--update_clipping=True', '--adam_atan2=True', '--learning_rate=3e-3', '--muon_lr=0.02']
    a, b = tmp_path / 'a', tmp_path / 'b'
    run_script('train.py', f'--out_dir={a}', '--max_iters=8', *common)
    run_script('train.py', f'--out_dir={b}', '--max_iters=4', *common)
    run_script('train.py', f'--out_dir={b}', '--max_iters=8', '--init_from=resume', *common)
    la = {r['iter']: r['loss'] for r in read_log(a)}
    lb = {r['iter']: r['loss'] for r in read_log(b)}
    assert sorted(la) == list(range(8)) and la == lb
    assert la[7] < la[0]


# ----------------------------------------------------------------------------- workspace recipe
def test_tf32_follows_dtype_or_key():
    cfg = dict(train_script().DEFAULTS)
    assert models.use_tf32(cfg, torch.float32) is False      # a float32 run is true FP32
    assert models.use_tf32(cfg, torch.bfloat16) is True
    assert models.use_tf32({**cfg, 'tf32': True}, torch.float32) is True
    assert models.use_tf32({**cfg, 'tf32': False}, torch.bfloat16) is False


@pytest.mark.parametrize('variant', VARIANTS)
def test_workspace_decays_weight_matrices_only(variant):
    m = Workspace(WorkspaceConfig(n_embd=32, n_head=2, d_ff=48, slot_dim=8, block_size=16, variant=variant,
                                  vocab_size=40))
    names = {id(p): n for n, p in m.named_parameters()}
    groups = m.optim_groups(0.1)
    decayed = {names[id(p)] for g in groups if g['weight_decay'] > 0 for p in g['params']}
    rest = {names[id(p)] for g in groups if g['weight_decay'] == 0 for p in g['params']}
    matrices = {f'{n}.weight' for n, mod in m.named_modules() if isinstance(mod, (torch.nn.Linear, torch.nn.Embedding))}
    assert decayed == matrices and not decayed & rest and decayed | rest == set(names.values())
    shaped_2d = {n for n, p in m.named_parameters() if p.ndim == 2} - matrices   # what decay by shape took
    assert shaped_2d <= rest
    expect = {'workspace': {'workspace.keys'}, 'conditioned_dense': {'cond_scale', 'cond_shift', 'readout'}}
    assert shaped_2d == expect.get(variant, set())
    opts = train.configure_optimizers(m, {**train_script().DEFAULTS, 'weight_decay': 0.1}, 'cpu')
    in_opt = {names[id(p)]: g['weight_decay'] for g in opts[0].param_groups for p in g['params']}
    assert all(in_opt[n] == 0.0 for n in shaped_2d)


# ----------------------------------------------------------------------------- TinyStories cap
def test_tinystories_byte_cap(tmp_path):
    src = tmp_path / 'ts'
    src.mkdir()
    rng = np.random.default_rng(0)
    train_text = ''.join(rng.choice(list('abc de\n'), size=5000))
    (src / 'TinyStoriesV2-GPT4-train.txt').write_text(train_text)
    (src / 'TinyStoriesV2-GPT4-valid.txt').write_text('once upon a time\n' * 20)
    out = tmp_path / 'data'
    d = prepare_data.prepare('tinystories', tokenizer='byte', input=str(src), out_dir=str(out), quiet=True,
                             max_train_tokens=1234)
    tr = np.fromfile(os.path.join(d, 'train.bin'), dtype=np.uint16)
    assert tr.tolist() == list(train_text.encode()[:1234])     # the first 1234 bytes
    assert len(np.fromfile(os.path.join(d, 'val.bin'), dtype=np.uint16)) == 17 * 20   # val is never capped
    d = prepare_data.prepare('tinystories', tokenizer='byte', input=str(src), out_dir=str(out), quiet=True)
    meta = json.load(open(os.path.join(d, 'meta.json')))
    assert meta['train_cap'] == 250_000_000 and meta['train_tokens'] == 5000   # the paper's cap, above this file
    with pytest.raises(prepare_data.DataError, match='max_train_tokens must be >= 0'):
        prepare_data.prepare('tinystories', tokenizer='byte', input=str(src), out_dir=str(out), max_train_tokens=-1)


# ----------------------------------------------------------------------------- the configs use them
def test_paper_configs_use_the_recipes():
    cfg = lambda name: train.resolve_config([os.path.join(os.path.dirname(__file__), '..', 'config', name)])
    for size in ('140m', '370m', '770m', '1_3b'):
        assert cfg(f'gpt_{size}.py')['init'] == 'scaled_zero'
        p = cfg(f'parcae_{size}.py')
        assert (p['muon_variant'], p['muon_momentum_warmup']) == ('parcae', 300)
    for name in ('parcae/rdm_100m.py', 'parcae/rdm_350m.py', 'parcae/rdm_parcae_100m.py', 'parcae/rdm_parcae_350m.py'):
        r = cfg(name)
        assert r['update_clipping'] and r['adam_atan2'] and r['learning_rate'] <= 4e-4
