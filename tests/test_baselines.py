"""baselines.GPT: nanoGPT's GPT-2 by default; each option changes the computation as specified."""
import pytest
import torch
import torch.nn.functional as F

from baselines import GPT, GPTConfig, local_attention, local_attention_reference


def tiny(**kw):
    base = dict(n_layer=2, n_head=4, n_embd=32, block_size=64, vocab_size=50, bias=True)
    return GPTConfig(**{**base, **kw})


def test_default_is_gpt2_124m_on_meta():
    with torch.device('meta'):
        assert GPT(GPTConfig()).num_params() == 124_475_904
        assert GPT(GPTConfig(vocab_size=50257)).num_params() == 124_439_808


def test_state_dict_uses_nanogpt_names():
    keys = set(GPT(tiny()).state_dict())
    for k in ['transformer.wte.weight', 'transformer.wpe.weight', 'transformer.h.0.ln_1.weight',
              'transformer.h.0.attn.c_attn.weight', 'transformer.h.0.attn.c_proj.bias',
              'transformer.h.1.mlp.c_fc.weight', 'transformer.ln_f.bias', 'lm_head.weight']:
        assert k in keys


OPTIONS = [dict(), dict(pos='rope'), dict(pos='alibi'), dict(pos='none'), dict(norm='rms', mlp='relu2', bias=False),
           dict(mlp='swiglu'), dict(qk_norm=True), dict(value_embeds=True), dict(windows=(4, 16)),
           dict(n_loop=3), dict(tie_weights=False), dict(pos='alibi', windows=5),
           dict(fused_qkv=False, value_embeds=True)]


@pytest.mark.parametrize('kw', OPTIONS, ids=[str(k) for k in OPTIONS])
def test_causal_and_decode_equals_forward(kw):
    torch.manual_seed(0)
    m = GPT(tiny(**kw)).eval()
    x = torch.randint(0, 50, (2, 24))
    logits, _ = m(x)
    x2 = x.clone()
    x2[:, 15:] = torch.randint(0, 50, (2, 9))
    assert torch.equal(m(x2)[0][:, :15], logits[:, :15])
    assert not torch.allclose(m(x2)[0][:, 15:], logits[:, 15:])
    state = m.decode_init(2, 'cpu')
    steps = []
    for t in range(24):
        lt, state = m.decode_step(x[:, t], state)
        steps.append(lt)
    torch.testing.assert_close(torch.stack(steps, 1), logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('kw,masked', [(dict(), False), (dict(windows=(4, 16)), False), (dict(pos='alibi'), True)])
def test_decode_passes_sdpa_a_mask_only_for_alibi(kw, masked, monkeypatch):
    # one query over its cache needs no mask (a windowed layer's cache keeps only its w keys), and
    # SDPA's flash kernel takes none; ALiBi's distances still go in as a bias
    masks = []
    sdpa = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        masks.append(kwargs.get('attn_mask'))
        return sdpa(*args, **kwargs)
    m = GPT(tiny(**kw)).eval()
    state = m.decode_init(2, 'cpu')
    monkeypatch.setattr(F, 'scaled_dot_product_attention', spy)
    for t in range(20):   # past the windows of 4 and 16
        m.decode_step(torch.full((2,), t % 50), state)
    assert len(masks) == 20 * 2 and all((mask is not None) == masked for mask in masks)


def test_separate_qkv_is_the_fused_matrix_split_and_muon_sees_three():
    # nanochat (and Parcae's blocks) keep q, k, v apart, so Muon orthogonalises each of them
    import train
    torch.manual_seed(0)
    fused = GPT(tiny())
    sep = GPT(tiny(fused_qkv=False))
    assert fused.num_params() == sep.num_params()
    sd = fused.state_dict()
    for i in range(2):
        w, b = (sd.pop(f'transformer.h.{i}.attn.c_attn.{t}') for t in ('weight', 'bias'))
        for name, wp, bp in zip('qkv', w.split([32, 32, 32]), b.split([32, 32, 32])):
            sd[f'transformer.h.{i}.attn.c_{name}.weight'], sd[f'transformer.h.{i}.attn.c_{name}.bias'] = wp, bp
    sep.load_state_dict(sd)
    x = torch.randint(0, 50, (2, 24))
    torch.testing.assert_close(sep(x)[0], fused(x)[0])
    cfg = {'optimizer': 'muon', 'weight_decay': 0.1, 'learning_rate': 1e-3, 'muon_lr': None, 'beta1': 0.9,
           'beta2': 0.95, 'eps': 1e-8, 'muon_momentum': 0.95, 'muon_weight_decay': 0.0}
    m = GPT(tiny(fused_qkv=False, value_embeds=True))
    names = {id(p): n for n, p in m.named_parameters()}
    adamw, muon = train.configure_optimizers(m, cfg, 'cpu')
    in_muon = {names[id(p)] for g in muon.param_groups for p in g['params']}
    in_adamw = {names[id(p)] for g in adamw.param_groups for p in g['params']}
    assert in_muon == {f'transformer.h.{i}.{n}.weight' for i in range(2)   # Parcae's Table 20
                       for n in ('attn.c_q', 'attn.c_k', 'attn.c_v', 'attn.c_proj', 'mlp.c_fc', 'mlp.c_proj')}
    assert 'transformer.h.1.attn.ve_gate.weight' in in_adamw and 'transformer.wte.weight' in in_adamw
    assert len(in_muon) + len(in_adamw) == len(names)


@pytest.mark.parametrize('w', [1, 3, 8, 17])
def test_window_sees_exactly_w_keys(w):
    torch.manual_seed(0)
    m = GPT(tiny(n_layer=1, windows=(w,), pos='none')).eval()
    x = torch.randint(0, 50, (1, 40))
    base = m(x)[0]
    i = 30
    seen = []
    for j in range(40):
        x2 = x.clone()
        x2[0, j] = (x[0, j] + 1) % 50
        if not torch.equal(m(x2)[0][0, i], base[0, i]):
            seen.append(j)
    assert seen == list(range(i - w + 1, i + 1))


@pytest.mark.parametrize('alibi', [False, True])
def test_flex_window_equals_chunked_path(alibi):
    # the CUDA path (FlexAttention, ALiBi as a score_mod), run eagerly on the CPU: float32 rounding
    # over <= 32 keys of D = 8, within assert_close's float32 tolerance (rtol 1.3e-6, atol 1e-5)
    torch.manual_seed(0)
    slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625]) if alibi else None
    for w, T in [(4, 37), (16, 64), (16, 5), (32, 200)]:
        q, k, v = (torch.randn(2, 4, T, 8) for _ in range(3))
        torch.testing.assert_close(local_attention(q, k, v, w, slopes, flex=True),
                                   local_attention(q, k, v, w, slopes, flex=False))


@pytest.mark.parametrize('w,T', [(4, 37), (16, 64), (16, 5), (32, 100)])
@pytest.mark.parametrize('alibi', [False, True])
def test_chunked_local_attention_equals_masked_full(w, T, alibi):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, T, 8) for _ in range(3))
    slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625]) if alibi else None
    dist = torch.arange(T)[:, None] - torch.arange(T)[None, :]
    bias = torch.zeros(4, T, T) if slopes is None else -slopes[:, None, None] * dist
    bias = bias.masked_fill((dist < 0) | (dist >= w), float('-inf'))
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    torch.testing.assert_close(local_attention(q, k, v, w, slopes), ref, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(local_attention_reference(q, k, v, w, slopes), ref, atol=1e-6, rtol=1e-5)


def test_options_change_parameters_as_specified():
    n = lambda **kw: GPT(tiny(**kw)).num_params()
    d, V, L, T = 32, 50, 2, 64
    assert n(pos='rope') == n() - T * d                      # no position table
    assert n(tie_weights=False) == n() + V * d               # separate head
    assert n(mlp='swiglu') == n() + L * (4 * d * d + 4 * d)  # the gate matrix and its bias
    assert n(n_loop=4) == n()                                # looping shares weights
    # value embeddings: layer 1 of 2 has one (i % 2 == (n-1) % 2), with its 32 -> n_head gate
    assert n(value_embeds=True) == n() + V * 4 * 8 + 32 * 4
    assert n(bias=False, norm='rms') < n()


def test_loop_and_norms_change_the_output():
    torch.manual_seed(0)
    x = torch.randint(0, 50, (1, 16))
    torch.manual_seed(1)
    a = GPT(tiny())(x)[0]
    torch.manual_seed(1)
    b = GPT(tiny(n_loop=2))(x)[0]
    assert not torch.allclose(a, b)


def test_learned_positions_refuse_longer_input():
    m = GPT(tiny(block_size=8))
    with pytest.raises(ValueError, match='longer than the 8 learned positions'):
        m(torch.zeros(1, 9, dtype=torch.long))
    m = GPT(tiny(block_size=8, n_positions=16))       # a longer table: usable past the training length
    assert m(torch.zeros(1, 16, dtype=torch.long))[0].shape == (1, 16, 50)


def test_flops_per_token_counts_loops_and_windows():
    m = GPT(tiny())
    base = m.flops_per_token(64)
    assert GPT(tiny(n_loop=2)).flops_per_token(64) > 1.9 * base - 6 * 32 * 50 * 2
    assert GPT(tiny(windows=(8, 8))).flops_per_token(64) < base
