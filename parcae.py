"""
Parcae: Scaling Laws for Stable Looped Language Models
Hayden Prairie, Zachary Novack, Taylor Berg-Kirkpatrick, Daniel Y. Fu (arXiv 2604.12946)

A middle-looped Transformer: a prelude P (L_P blocks), a recurrent block R (L_R blocks) looped T
times, a coda C (L_C blocks). The loop is a stable discretised linear dynamical system over the
residual stream (sec. 4.1, eq. 3), in the order forward computes it:

    e       = Norm(P(s))                         prelude norm (Table 4)
    h_0     ~ TruncNormal(0, 2/(5d))             'like-init' (Tables 17, 18)
    A_bar   = exp(-Delta A),  A = exp(A_log),  Delta = softplus(dt_bias)      ZOH (Table 1)
    B_bar   = Delta B                            Euler; B is d x d
    h_{t+1} = R(A_bar h_t + B_bar e),  t < T     R's blocks keep their own residuals
    logits  = head(Norm(Coda(C h_T)))            C: a d x d readout

A > 0 per channel, so every eigenvalue of A_bar lies in (0, 1): rho(A_bar) < 1 for any parameters.
injection='linear' is the RDM's W [h; e] (Geiping et al. 2025, the baseline Parcae fixes; with
block='sandwich', prelude_norm=False). Training draws T ~ Poisson(mean_recurrence) per sequence,
clipped to [1, max_recurrence], and backpropagates through the last k = min(T, mean_backprop_depth)
steps, the first T - k under no_grad (sec. 4.2; mu_bwd = ceil(mu_rec / 2)).

Readings where the paper is vague (the authors' code, sandyresearch/parcae, settles most; how each
was found: docs/parcae.md):
- Per-sequence depths in one batch: the batch is sorted by T, so the sequences still looping are a
  prefix and each step runs R on that prefix only (cost sum_i T_i block applications, no masking).
- B_bar e (linear: W_e e) does not change over the loop: computed once per forward.
- rho(A_bar) < 1 in float32 too: Delta A is computed in log space and floored at 1e-6.
- h_0 in eval is a fixed seeded table, one row per position: eval is deterministic and the
  KV-cached decode sees forward's h_0.
- Value embeddings on the layers i % 2 == (n - 1) % 2 of the n = L_P + L_R + L_C layers, as in an
  n-layer GPT; an R layer adds its own at every step.
- Init 'scaled_zero' (Table 18): matrices and embeddings N(0, 2/(5d)) truncated at 3 std, attention
  and MLP output projections zero, value-embedding gates zero, A_bar = sqrt(1/5), B = I. 'scaled'
  (Table 17, the RDM setup): the output projections at that std / sqrt(2 D), D = L_P + L_C + mu L_R
  the expected depth, as the authors' code.
- readout=False drops C (C = I), as Table 17's Parcae-350M count.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

# ----------------------------------------------------------------------------- the paper's loop, plainly
# What Parcae.forward computes, as the equations above read, at one depth T; forward runs the same
# loop by the fast path below, and the tests hold that to this.

def parcae_reference(model, idx, T, backprop_depth=None, h0=None):
    """The logits of `model` (a Parcae) at depth T, the first T - k steps without gradient, k =
    min(T, backprop_depth) (None: all T; sec. 4.2). h0 None: the model's h_0 (_initial_state)."""
    m, cfg, (B, L) = model, model.config, idx.shape
    cos, sin = rope_tables(L, cfg.head_dim, cfg.rope_base, idx.device)
    x = m.wte(idx)                                                         # (B, L, d)
    for i, block in enumerate(m.prelude):
        x = block(x, cos, sin, m._value_embed(i, idx))
    e = m.prelude_norm(x) if m.prelude_norm is not None else x              # e = Norm(P(s))
    h = m._initial_state(B, L, idx.device) if h0 is None else h0            # h_0, (B, L, d)
    k = T if backprop_depth is None else min(T, backprop_depth)
    for t in range(T):
        with torch.set_grad_enabled(torch.is_grad_enabled() and t >= T - k):
            h = m.injection.reference(h, e)                                 # A_bar h_t + B_bar e
            for i, block in enumerate(m.recur):
                h = block(h, cos, sin, m._value_embed(cfg.n_prelude + i, idx))   # h_{t+1} = R(...)
    x = m.C(h) if m.C is not None else h
    for i, block in enumerate(m.coda):
        x = block(x, cos, sin, m._value_embed(cfg.n_prelude + cfg.n_recur_layers + i, idx))
    return m.lm_head(m.ln_f(x))                                             # (B, L, vocab)


@dataclass
class ParcaeConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_embd: int = 768
    n_head: int = 6
    head_dim: int = None          # None: n_embd // n_head
    d_ff: int = None              # None: 4 * n_embd
    n_prelude: int = 2            # L_P
    n_recur_layers: int = 2       # L_R, the looped block
    n_coda: int = 2               # L_C
    mlp: str = 'relu2'            # 'relu2' (nanochat setup, Table 18) | 'swiglu' (RDM setup, Table 17)
    block: str = 'prenorm'        # 'prenorm' | 'sandwich' (RDM: norm before and after each sublayer)
    qk_norm: bool = True          # parameter-free RMS norm of q and k
    value_embeds: bool = True     # nanochat value embeddings on alternating layers
    rope_base: float = 50000.0
    norm_eps: float = 1e-5
    tie_weights: bool = True
    injection: str = 'diagonal'   # 'diagonal' (Parcae: A_bar h + B_bar e) | 'linear' (RDM: W [h; e])
    prelude_norm: bool = True     # e = Norm(P(s)) (Table 4, "+ Prelude Norm")
    readout: bool = True          # the d x d readout C (False: C = I)
    init_decay: float = 0.4472135954999579   # A_bar at init, sqrt(1/5) as the authors' code
    init: str = 'scaled_zero'     # 'scaled_zero' (Table 18) | 'scaled' (Table 17, the RDM setup)
    mean_recurrence: int = 8      # mu_rec; eval runs this many steps unless num_recur is given
    mean_backprop_depth: int = None   # mu_bwd; None: ceil(mean_recurrence / 2)
    max_recurrence: int = None    # upper clip of the sampled depth; None: 3 * mean_recurrence
    depth_sampling: str = 'per_sequence'  # 'per_sequence' (paper) | 'per_batch' (prior work) | 'fixed'

    def __post_init__(self):
        self.head_dim = self.head_dim or self.n_embd // self.n_head
        self.d_ff = self.d_ff or 4 * self.n_embd
        if self.mean_backprop_depth is None:
            self.mean_backprop_depth = math.ceil(self.mean_recurrence / 2)
        if self.max_recurrence is None:
            self.max_recurrence = 3 * self.mean_recurrence
        checks = [
            (self.mlp in ('relu2', 'swiglu'), f"mlp must be relu2|swiglu, got {self.mlp!r}"),
            (self.block in ('prenorm', 'sandwich'), f"block must be prenorm|sandwich, got {self.block!r}"),
            (self.injection in ('diagonal', 'linear'), f"injection must be diagonal|linear, got {self.injection!r}"),
            (self.init in ('scaled_zero', 'scaled'), f"init must be scaled_zero|scaled, got {self.init!r}"),
            (self.depth_sampling in ('per_sequence', 'per_batch', 'fixed'),
             f"depth_sampling must be per_sequence|per_batch|fixed, got {self.depth_sampling!r}"),
            (self.mean_recurrence >= 1 and self.mean_backprop_depth >= 1, "mean_recurrence and mean_backprop_depth must be >= 1"),
            (self.max_recurrence >= self.mean_recurrence, "max_recurrence must be >= mean_recurrence"),
            (self.n_recur_layers >= 1, "n_recur_layers must be >= 1"),
            (not self.value_embeds or self.n_head * self.head_dim >= 32, "value-embedding gates read 32 channels"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ValueError(msg)


# ----------------------------------------------------------------------------- blocks (nanochat style)

def rope_tables(T, head_dim, base, device, offset=0):
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    t = torch.arange(offset, offset + T, device=device, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)
    return freqs.cos(), freqs.sin()  # (T, head_dim/2)


def apply_rope(x, cos, sin):  # x: (B, H, L, hd), rotate the two halves
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).type_as(x)


class Attention(nn.Module):

    def __init__(self, cfg, has_ve):
        super().__init__()
        self.cfg, self.H, self.hd = cfg, cfg.n_head, cfg.head_dim
        inner = cfg.n_head * cfg.head_dim
        # separate q, k, v matrices: Muon orthogonalises each (Table 20 lists W_Q, W_K, W_V, W_O)
        self.c_q = nn.Linear(cfg.n_embd, inner, bias=False)
        self.c_k = nn.Linear(cfg.n_embd, inner, bias=False)
        self.c_v = nn.Linear(cfg.n_embd, inner, bias=False)
        self.c_proj = nn.Linear(inner, cfg.n_embd, bias=False)
        self.ve_gate = nn.Linear(32, cfg.n_head, bias=False) if has_ve else None

    def forward(self, x, cos, sin, ve=None, cache=None):  # x: (B, L, d), L the sequence length
        B, L, _ = x.shape
        q = self.c_q(x).view(B, L, self.H, self.hd).transpose(1, 2)         # (B, H, L, hd)
        k = self.c_k(x).view(B, L, self.H, self.hd).transpose(1, 2)         # (B, H, L, hd)
        v = self.c_v(x).view(B, L, self.H, self.hd)                         # (B, L, H, hd)
        if ve is not None:
            gate = 2 * torch.sigmoid(self.ve_gate(x[..., :32]))  # (B, L, H), in (0, 2)
            v = v + gate.unsqueeze(-1) * ve.view(B, L, self.H, self.hd).to(v.dtype)
        v = v.transpose(1, 2)                                               # (B, H, L, hd)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.cfg.qk_norm:
            q, k = F.rms_norm(q, (self.hd,)), F.rms_norm(k, (self.hd,))
        if cache is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # one new token: it sees every cached key
            if 'k' in cache:
                k, v = torch.cat([cache['k'], k], dim=2), torch.cat([cache['v'], v], dim=2)  # (B, H, pos + 1, hd)
            cache['k'], cache['v'] = k, v
            y = F.scaled_dot_product_attention(q, k, v)                     # (B, H, L, hd)
        return self.c_proj(y.transpose(1, 2).reshape(B, L, self.H * self.hd))   # (B, L, d)


class MLP(nn.Module):

    def __init__(self, cfg):
        super().__init__()
        self.kind = cfg.mlp
        self.c_fc = nn.Linear(cfg.n_embd, cfg.d_ff, bias=False)
        if cfg.mlp == 'swiglu':
            self.c_gate = nn.Linear(cfg.n_embd, cfg.d_ff, bias=False)
        self.c_proj = nn.Linear(cfg.d_ff, cfg.n_embd, bias=False)

    def forward(self, x):
        h = self.c_fc(x)                                                    # (B, L, d_ff)
        h = F.relu(h).square() if self.kind == 'relu2' else F.silu(self.c_gate(x)) * h
        return self.c_proj(h)


class Block(nn.Module):
    """Pre-norm block; 'sandwich' is the RDM block (Geiping et al., section 2.1):
    x = Norm(x + Attn(Norm(x))), x = Norm(x + MLP(Norm(x)))."""

    def __init__(self, cfg, has_ve):
        super().__init__()
        self.sandwich = cfg.block == 'sandwich'
        n_norms = 4 if self.sandwich else 2
        self.norms = nn.ModuleList(nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps) for _ in range(n_norms))
        self.attn = Attention(cfg, has_ve)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, ve=None, cache=None):
        n = self.norms
        if self.sandwich:
            x = n[1](x + self.attn(n[0](x), cos, sin, ve, cache))
            return n[3](x + self.mlp(n[2](x)))
        x = x + self.attn(n[0](x), cos, sin, ve, cache)
        return x + self.mlp(n[1](x))


# ----------------------------------------------------------------------------- the injection
# How each loop step reads the state h and the prelude's output e. loop_constants(e) gives what
# stays fixed over the T steps, once per forward (B_bar e saves T - 1 d x d matmuls per token);
# forward is one step's input to R; reference is the same map as its paper writes it.

class DiagonalInjection(nn.Module):
    """Parcae (eq. 3, Table 1): A_bar h + B_bar e, A_bar = exp(-Delta A) with A = exp(A_log) > 0 per
    channel and Delta = softplus(dt_bias) (ZOH), B_bar = Delta B (Euler)."""

    def __init__(self, cfg):
        super().__init__()
        d, self.init_decay = cfg.n_embd, cfg.init_decay
        self.A_log = nn.Parameter(torch.zeros(d))
        self.dt_bias = nn.Parameter(torch.empty(d))
        self.B = nn.Parameter(torch.empty(d, d))

    @torch.no_grad()
    def reset_parameters(self):  # A = 1, A_bar = init_decay, B = I (authors' code)
        self.A_log.zero_()
        dt = -math.log(self.init_decay)                        # Delta with A = 1: A_bar = exp(-Delta)
        self.dt_bias.fill_(dt + math.log(-math.expm1(-dt)))    # inverse softplus
        self.B.copy_(torch.eye(self.B.shape[0]))

    def A_bar(self):
        """exp(-Delta A) per channel, in (0, 1) in float32 too: log(Delta A) = log softplus(dt_bias)
        + A_log, with log softplus(x) = x for x < -20, and Delta A floored at 1e-6."""
        x = self.dt_bias.float()
        log_delta = torch.where(x < -20, x, torch.log(F.softplus(x.clamp(min=-20))))
        return torch.exp(-torch.exp(log_delta + self.A_log.float()).clamp(min=1e-6))

    def loop_constants(self, e):
        delta = F.softplus(self.dt_bias.float())
        return self.A_bar(), delta * F.linear(e, self.B)      # A_bar, B_bar e = Delta B e

    def forward(self, h, A_bar, Be):
        return A_bar * h + Be

    def reference(self, h, e):
        delta, A = F.softplus(self.dt_bias), torch.exp(self.A_log)
        return torch.exp(-delta * A) * h + delta * (e @ self.B.T)

    def spectral_radius(self):
        return self.A_bar().max().item()

    def singular_value(self):   # A_bar is diagonal: its largest singular value is its spectral radius
        return self.spectral_radius()


class LinearInjection(nn.Module):
    """The RDM's (Geiping et al.): W [h; e], W in R^{d x 2d} unconstrained (Table 1: rho(W_h) may
    exceed 1). W = [W_h W_e]; W_e e is the loop constant."""

    def __init__(self, cfg):
        super().__init__()
        self.d = cfg.n_embd
        self.W = nn.Linear(2 * self.d, self.d, bias=False)

    def reset_parameters(self):  # W keeps the model's matrix init
        pass

    def loop_constants(self, e):
        return None, F.linear(e, self.W.weight[:, self.d:])

    def forward(self, h, _, We):
        return F.linear(h, self.W.weight[:, :self.d]) + We

    def reference(self, h, e):
        return self.W(torch.cat([h, e], dim=-1))

    def spectral_radius(self):
        return torch.linalg.eigvals(self.W.weight[:, :self.d].float()).abs().max().item()

    def singular_value(self):   # ||W_h||_2 >= rho(W_h): what the authors' code logs for the RDM
        return torch.linalg.matrix_norm(self.W.weight[:, :self.d].float(), ord=2).item()


INJECTIONS = {'diagonal': DiagonalInjection, 'linear': LinearInjection}


# ---------------------------------------------------------------- fast path: per-sequence depths, a sorted prefix
# Training draws a depth per sequence; with the batch sorted by depth the sequences still looping
# are a prefix, and each step runs R on that prefix alone. Under torch.compile the loop runs eagerly
# and calls the compiled recurrent block (Parcae._step) once a step; the helpers it calls run
# eagerly too (a function called from the loop would otherwise compile on its own).

@torch.compiler.disable
def mark_batch_dynamic(*tensors):
    """Marks the batch dimension dynamic, so that one compiled graph of the recurrent block serves
    every batch and prefix size (torch.compile keeps size 1 apart)."""
    for t in tensors:
        if t is not None and t.shape[0] > 1:
            torch._dynamo.maybe_mark_dynamic(t, 0)  # torch 2.13 has no public form of it


@torch.compiler.disable
def running(m, h, u, ves):
    """The first m rows of h, u and the value embeddings: the sequences still looping (sorted by depth)."""
    h, u, ves = h[:m], u[:m], [None if v is None else v[:m] for v in ves]
    mark_batch_dynamic(h, u, *ves)
    return h, u, ves


@torch.compiler.disable
def detached(u, A_bar, ves):
    """The loop constants without autograd history: no-grad steps share eval's compiled graphs."""
    return u.detach(), None if A_bar is None else A_bar.detach(), [None if v is None else v.detach() for v in ves]


@torch.compiler.disable(recursive=False)  # the loop runs eagerly; the blocks it calls compile
def loop(model, h, u, A_bar, ves, cos, sin, T, k):
    """parcae_reference's loop batched at one depth T, from h = h_0 (B, L, d) and the input term
    u = B_bar e (B, L, d): the first T - k steps without gradient. Returns h_T and h_{T-1}."""
    with torch.no_grad():
        u_ng, A_ng, ves_ng = detached(u, A_bar, ves)
        for _ in range(T - k):
            mark_batch_dynamic(h, u_ng, *ves_ng)
            h = model._step(h, u_ng, A_ng, ves_ng, cos, sin)
    for _ in range(k):
        mark_batch_dynamic(h, u, *ves)
        h, h_prev = model._step(h, u, A_bar, ves, cos, sin), h
    return h, h_prev.detach()


@torch.compiler.disable(recursive=False)
def loop_per_sequence(model, h, u, A_bar, ves, cos, sin, T_i, k_i):
    """loop at per-sequence depths: the batch comes sorted by depth (T_i descending), sequence i
    runs T_i steps, the first T_i - k_i without gradient, each step on the running prefix alone.
    Returns h_T and h_{T-1} in the sorted order."""
    B, n_i = len(T_i), [t - k for t, k in zip(T_i, k_i)]
    if max(n_i) > 0:
        with torch.no_grad():
            h_ng = h.detach().clone()
            u_ng, A_ng, ves_ng = detached(u, A_bar, ves)
            for s in range(max(n_i)):
                m = sum(n > s for n in n_i)
                h_m, u_m, ves_m = running(m, h_ng, u_ng, ves_ng)                 # (m, L, d)
                h_ng[:m] = model._step(h_m, u_m, A_ng, ves_m, cos, sin)
        m = sum(n > 0 for n in n_i)
        h = h_ng if m == B else torch.cat([h_ng[:m], h[m:]])
    h_prev = h.detach().clone()
    for s in range(max(k_i)):
        m = sum(k > s for k in k_i)
        h_prev[:m] = h[:m].detach()
        h_m, u_m, ves_m = running(m, h, u, ves)                                   # (m, L, d)
        new = model._step(h_m, u_m, A_bar, ves_m, cos, sin)
        h = new if m == B else torch.cat([new, h[m:]])                           # (B, L, d)
    return h, h_prev


@torch.compiler.disable(recursive=False)
def recur(model, u, ves, A_bar, cos, sin, num_recur, seeds=None):
    """Draws the depths and runs the loop from the input term u = B_bar e (B, L, d) and the
    recurrent layers' value embeddings; returns h_T (B, L, d) in the batch's order. A batch at one
    depth (eval, a given num_recur, fixed or per-batch sampling) runs loop; per-sequence depths run
    loop_per_sequence on the batch sorted by depth. seeds: Parcae.forward's."""
    cfg, B = model.config, u.shape[0]
    if model.training:
        depths = model.sample_depths(B, seeds) if num_recur is None else [num_recur] * B
        k_i = [min(t, cfg.mean_backprop_depth) for t in depths]
    else:  # eval: fixed depth, ordinary autograd through every step
        depths = k_i = [cfg.mean_recurrence if num_recur is None else num_recur] * B
    perm = None
    if len(set(depths)) == 1:
        h0 = model._initial_state(B, u.shape[1], u.device, seeds=seeds).to(u.dtype)
        h, h_prev = loop(model, h0, u, A_bar, ves, cos, sin, depths[0], k_i[0])
    else:
        order = sorted(range(B), key=lambda i: -depths[i])
        # pinned and non-blocking: a pageable copy would wait for the device's queue every forward
        perm = torch.tensor(order, pin_memory=u.is_cuda).to(u.device, non_blocking=True)
        u, ves = u[perm], [None if v is None else v[perm] for v in ves]
        h0 = model._initial_state(B, u.shape[1], u.device, seeds=seeds and [seeds[i] for i in order]).to(u.dtype)
        h, h_prev = loop_per_sequence(model, h0, u, A_bar, ves, cos, sin, [depths[i] for i in order],
                                      [k_i[i] for i in order])
    if model.training:  # paper A.2: recurrent residual ||h_T - h_{T-1}|| and state norm ||h_T||
        hd = h.detach().float()
        model._stats = {'recurrent_residual': (hd - h_prev.float()).norm(dim=-1).mean(),
                        'state_norm': hd.norm(dim=-1).mean(), 'depths': depths}
    return h if perm is None else h[torch.argsort(perm)]


# ----------------------------------------------------------------------------- Parcae

class Parcae(nn.Module):
    knobs = decode_knobs = ('num_recur',)   # the runtime controls of forward and decode

    def __init__(self, config):
        super().__init__()
        cfg = self.config = config
        d, L_P, L_R, L_C = cfg.n_embd, cfg.n_prelude, cfg.n_recur_layers, cfg.n_coda
        n = L_P + L_R + L_C
        has_ve = [cfg.value_embeds and i % 2 == (n - 1) % 2 for i in range(n)]  # as a GPT: Table 19
        self.wte = nn.Embedding(cfg.vocab_size, d)
        self.prelude = nn.ModuleList(Block(cfg, has_ve[i]) for i in range(L_P))
        self.prelude_norm = nn.RMSNorm(d, eps=cfg.norm_eps) if cfg.prelude_norm else None
        self.recur = nn.ModuleList(Block(cfg, has_ve[L_P + i]) for i in range(L_R))
        self.coda = nn.ModuleList(Block(cfg, has_ve[L_P + L_R + i]) for i in range(L_C))
        self.ln_f = nn.RMSNorm(d, eps=cfg.norm_eps)
        self.value_embeds = nn.ModuleDict({str(i): nn.Embedding(cfg.vocab_size, cfg.n_head * cfg.head_dim)
                                           for i in range(n) if has_ve[i]})
        self.injection = INJECTIONS[cfg.injection](cfg)
        self.C = nn.Linear(d, d, bias=False) if cfg.readout else None  # None: C = I (Table 17, Parcae-350M)
        self.lm_head = nn.Linear(d, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.lm_head.weight = self.wte.weight
        self.std = math.sqrt(2 / (5 * d))
        self.reset_parameters()
        self._stats = {}
        self._h0_eval = {}

    @torch.no_grad()
    def reset_parameters(self):
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.trunc_normal_(m.weight, std=self.std, a=-3 * self.std, b=3 * self.std)
        cfg = self.config
        depth = cfg.n_prelude + cfg.n_coda + cfg.mean_recurrence * cfg.n_recur_layers
        out_std = self.std / math.sqrt(2 * depth)
        for block in [*self.prelude, *self.recur, *self.coda]:
            for w in (block.attn.c_proj.weight, block.mlp.c_proj.weight):
                if cfg.init == 'scaled':
                    nn.init.trunc_normal_(w, std=out_std, a=-3 * out_std, b=3 * out_std)
                else:
                    nn.init.zeros_(w)
            if block.attn.ve_gate is not None:
                nn.init.zeros_(block.attn.ve_gate.weight)
        self.injection.reset_parameters()

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def spectral_radius(self):
        """rho of the injection's linear map h -> A_bar h (Table 1)."""
        with torch.no_grad():
            return self.injection.spectral_radius()

    def _value_embed(self, layer, idx):
        key = str(layer)
        return self.value_embeds[key](idx) if key in self.value_embeds else None

    def _prelude(self, idx, cos, sin, caches=None):
        x = self.wte(idx)                                                   # (B, L, d)
        for i, block in enumerate(self.prelude):
            x = block(x, cos, sin, self._value_embed(i, idx), None if caches is None else caches[i])
        return self.prelude_norm(x) if self.prelude_norm is not None else x

    def _step(self, h, u, A_bar, ves, cos, sin, caches=None):
        """One application of the recurrent block: h_{t+1} = R(A_bar h_t + B_bar e)."""
        x = self.injection(h, A_bar, u)
        for i, block in enumerate(self.recur):
            x = block(x, cos, sin, ves[i], None if caches is None else caches[i])
        return x

    def _coda(self, h, idx, cos, sin, caches=None):
        x = self.C(h).to(h.dtype) if self.C is not None else h  # keep the residual stream's dtype
        first = self.config.n_prelude + self.config.n_recur_layers
        for i, block in enumerate(self.coda):
            x = block(x, cos, sin, self._value_embed(first + i, idx), None if caches is None else caches[i])
        return self.lm_head(self.ln_f(x))                                   # (B, L, vocab)

    def forward(self, idx, targets=None, num_recur=None, seeds=None):
        """The logits, and the loss when targets are given. num_recur is the loop depth T. Without
        it, training draws the depths (sample_depths) and eval runs mean_recurrence steps. With it,
        every sequence runs T steps; in training the gradient still flows through the last
        min(T, mean_backprop_depth) of them only. seeds: one a sequence (the trainer's), what its depth and h_0 come from."""
        cos, sin = rope_tables(idx.shape[1], self.config.head_dim, self.config.rope_base, idx.device)
        e = self._prelude(idx, cos, sin)                                    # (B, L, d)
        # what the loop reads and never changes, computed here, inside the compiled graph
        A_bar, u = self.injection.loop_constants(e)                         # (d,) or None, (B, L, d)
        ves = [self._value_embed(self.config.n_prelude + i, idx) for i in range(self.config.n_recur_layers)]
        h = recur(self, u, ves, A_bar, cos, sin, num_recur, None if seeds is None else seeds.tolist())  # h_T, (B, L, d)
        logits = self._coda(h, idx, cos, sin)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    # --- the training depths and h_0, host-side: the fast path calls them outside the compiled graphs

    @torch.compiler.disable  # host-side draws: traced, they were a graph broken at .tolist()
    def sample_depths(self, batch_size, seeds=None):
        """The training depths T_i, as Python ints. 'per_sequence' (section 4.2) draws each from a
        Poisson with mean mean_recurrence, clipped to [1, max_recurrence]; 'per_batch' draws one
        such depth for the whole micro-batch (seeds: from seeds[i], or the first); 'fixed': mean_recurrence."""
        cfg = self.config
        if cfg.depth_sampling == 'fixed':
            return [cfg.mean_recurrence] * batch_size
        size = batch_size if cfg.depth_sampling == 'per_sequence' else 1
        gens = [torch.Generator().manual_seed(s) for s in seeds[:size]] if seeds else [None] * size
        T = [int(torch.poisson(torch.tensor([cfg.mean_recurrence * 1.0]), g).clamp(1, cfg.max_recurrence)) for g in gens]
        return T if size == batch_size else T * batch_size

    @torch.compiler.disable
    def _initial_state(self, B, T, device, offset=0, seeds=None):
        d, std = self.config.n_embd, self.std
        if self.training:
            h = torch.empty(B, T, d, device=device)   # with seeds, row i from a generator of seeds[i], on the device
            for r, g in zip(h if seeds else [h], [torch.Generator(device).manual_seed(s) for s in seeds] if seeds else [None]):
                nn.init.trunc_normal_(r, std=std, a=-3 * std, b=3 * std, generator=g)
            return h
        if device not in self._h0_eval:  # fixed table, one row per position
            g = torch.Generator().manual_seed(0)
            table = torch.randn(self.config.block_size, d, generator=g).clamp_(-3, 3) * std
            self._h0_eval[device] = table.to(device)
        table = self._h0_eval[device]
        rows = torch.arange(offset, offset + T, device=device) % table.shape[0]
        return table[rows].expand(B, T, d).clone()

    # --- decode (KV caches for every P layer, every (step, R layer), every C layer), optimizer groups, FLOPs

    def decode_init(self, batch_size, device, num_recur=None):
        cfg, T = self.config, self.config.mean_recurrence if num_recur is None else num_recur
        return {'pos': 0, 'T': T, 'prelude': [{} for _ in range(cfg.n_prelude)],
                'recur': [[{} for _ in range(cfg.n_recur_layers)] for _ in range(T)],
                'coda': [{} for _ in range(cfg.n_coda)]}

    @torch.no_grad()
    def decode_step(self, idx_t, state, num_recur=None):
        T = state['T']
        assert num_recur is None or num_recur == T, "num_recur is fixed at decode_init"
        idx, pos = idx_t.view(-1, 1), state['pos']                          # (B, 1)
        cos, sin = rope_tables(1, self.config.head_dim, self.config.rope_base, idx.device, offset=pos)
        e = self._prelude(idx, cos, sin, state['prelude'])
        A_bar, u = self.injection.loop_constants(e)
        ves = [self._value_embed(self.config.n_prelude + i, idx) for i in range(self.config.n_recur_layers)]
        h = self._initial_state(idx.shape[0], 1, idx.device, offset=pos).to(u.dtype)
        for t in range(T):
            h = self._step(h, u, A_bar, ves, cos, sin, state['recur'][t])
        logits = self._coda(h, idx, cos, sin, state['coda'])
        state['pos'] = pos + 1
        return logits[:, -1], state                                         # (B, vocab)

    def optim_groups(self, weight_decay):
        """Table 20: Muon for the attention and MLP matrices; AdamW for embeddings, head, norms,
        value-embedding gates, 1-D parameters, the injection (A, Delta, B; the RDM's W) and C.
        A, Delta, B and C never decay (authors' code)."""
        muon = [p for blk in [*self.prelude, *self.recur, *self.coda]
                for mod in (blk.attn.c_q, blk.attn.c_k, blk.attn.c_v, blk.attn.c_proj, *blk.mlp.children())
                for p in mod.parameters()]
        seen = {id(p) for p in muon}
        no_decay = [p for name, p in self.named_parameters()
                    if p.ndim < 2 or name in ('injection.B', 'C.weight')]
        seen |= {id(p) for p in no_decay}
        decay = [p for p in self.parameters() if id(p) not in seen]
        return [{'params': muon, 'weight_decay': weight_decay, 'optimizer': 'muon'},
                {'params': decay, 'weight_decay': weight_decay, 'optimizer': 'adamw'},
                {'params': no_decay, 'weight_decay': 0.0, 'optimizer': 'adamw'}]

    def train_stats(self):
        """Stability monitors (paper A.2) from the last training forward."""
        with torch.no_grad():
            out = {'spectral_radius': self.spectral_radius(), 'singular_value': self.injection.singular_value()}
        if self._stats:
            out['recurrent_residual'] = self._stats['recurrent_residual'].item()
            out['state_norm'] = self._stats['state_norm'].item()
            depths = self._stats['depths']
            out['depth_mean'] = sum(depths) / len(depths)
            out['depth_max'] = float(max(depths))
        return out

    def depth_moments(self):
        """(E[T], E[k]) under the training distribution: block applications forward and with
        gradient per token (flops_per_token counts each as it runs)."""
        cfg = self.config
        mu, kb, Tmax = cfg.mean_recurrence, cfg.mean_backprop_depth, cfg.max_recurrence
        if cfg.depth_sampling == 'fixed':
            return float(mu), float(min(mu, kb))
        pmf = [math.exp(-mu + j * math.log(mu) - math.lgamma(j + 1)) for j in range(Tmax)]
        pmf.append(max(0.0, 1.0 - sum(pmf)))  # all mass at or above Tmax is clipped to Tmax
        ET = sum(p * min(max(j, 1), Tmax) for j, p in enumerate(pmf))
        Ek = sum(p * min(max(j, 1), Tmax, kb) for j, p in enumerate(pmf))
        return ET, Ek

    def flops_per_token(self, seq_len):
        """Training flops per token: 6 N for P, C, head; the recurrent block E[T] times forward
        (2 N) and E[k] times backward (4 N); attention 4 (fwd) + 8 (bwd) * H * hd * seq_len per layer
        application."""
        cfg = self.config
        d, attn_ctx = cfg.n_embd, cfg.n_head * cfg.head_dim * seq_len

        def matmul(blocks):
            return sum(m.weight.numel() for b in blocks for m in b.modules() if isinstance(m, nn.Linear))
        ET, Ek = self.depth_moments()
        once = matmul(self.prelude) + matmul(self.coda) + d * cfg.vocab_size
        once += d * d * (1 + cfg.readout)  # C, and B e (or the e half of W) once per forward
        per_step = matmul(self.recur) + (d * d if cfg.injection == 'linear' else 0)
        flops = 6 * once + (2 * ET + 4 * Ek) * per_step
        flops += 12 * attn_ctx * (cfg.n_prelude + cfg.n_coda) + (4 * ET + 8 * Ek) * attn_ctx * cfg.n_recur_layers
        return flops


# ----------------------------------------------------------------------------- the paper's optimizers (Section Q)
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
            # the matrices of one shape go as one stacked batch (a few dispatches per shape, not per
            # matrix); every norm, mean and scale below is still per matrix, over dims (-2, -1)
            by_shape = {}
            for p in group['params']:
                if p.grad is not None:
                    by_shape.setdefault((p.shape, p.dtype, p.device), []).append(p)
            for ((rows, cols), _, _), ps in by_shape.items():
                along = -1 if rows >= cols else -2   # mean over the shorter side: one v per long-side index
                for p in ps:
                    if not self.state[p]:
                        self.state[p]['momentum_buffer'] = torch.zeros_like(p)
                        self.state[p]['second_moment'] = torch.zeros((rows, 1) if along == -1 else (1, cols),
                                                                     device=p.device)
                bufs = [self.state[p]['momentum_buffer'] for p in ps]
                vs = [self.state[p]['second_moment'] for p in ps]
                grads = [p.grad for p in ps]
                torch._foreach_lerp_(bufs, grads, 1 - mu)
                O = polar_express(torch.stack(grads).lerp_(torch.stack(bufs), mu), group['ns_steps']).float()
                v = torch.stack(vs).lerp_(O.square().mean(dim=along, keepdim=True), 1 - group['beta2'])
                torch._foreach_copy_(vs, list(v.unbind(0)))
                U = O * v.clamp_min(1e-10).rsqrt()
                U *= O.norm(dim=(-2, -1), keepdim=True) / U.norm(dim=(-2, -1), keepdim=True).clamp_min(1e-10)
                P = torch.stack(ps)
                U += wd * P * (U * P >= 0)
                torch._foreach_sub_(ps, list(U.to(ps[0].dtype).unbind(0)), alpha=lr * max(1.0, rows / cols) ** 0.5)


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
                update = torch.atan2(m_hat, v_hat.sqrt()) if group['atan2'] else m_hat / (v_hat.sqrt() + group['eps'])
                p.mul_(1 - step_lr * group['weight_decay'])
                p.sub_(step_lr * update)
