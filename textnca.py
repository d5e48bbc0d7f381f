"""
TextNCA: Neural Cellular Automata for Language Modeling via Hierarchical Local Attention
Avni Mittal, Avinash Anand, Ashutosh Kumar, Dikshant Kukreja, Kritarth Prasad, Sushane Dulloo,
Erik Cambria, Timothy Liu, Zhengkui Wang, Rajiv Ratn Shah (arXiv 2608.02050)

A 1D causal neural cellular automaton: every token holds a state h_i, and one shared local rule is
iterated in place. As implemented (c = emb_scale, sqrt(d) by default):

    h_0 = c (TokenEmbed(x) + PosEmbed(x))                          Eq. 1, scaled by c
    s_n = c StepEmbed[n],  n = (k-1) Ts + t                        Eq. 9
    u   = FFN(LN(Perceive_w(h + s_n)))                             Eq. 2; Perceive_w: Eq. 4
    h   = (1 - z) h + z tanh(W_h [r * h; u])                       Eq. 5-8, 10 (the GRU gate)
    logits = LMHead(LN(h_N)),  LMHead tied to TokenEmbed           Eq. 3

Hier-TextNCA (the flagship) runs K = len(windows) stages with windows (8, 32, 128); stage k has its
own weights and applies them Ts = 4 times. Every ablation of the paper is a config field: windows,
Ts, orchestration, gate, step_embed, kernel, stochastic_Ts, readout_block. forward(idx, targets, Ts)
takes the iteration count as a knob; step_logits / step_losses (the logit lens, Fig. 8), gate_stats
(Fig. 10) and step_names ('emb', 'S1.1', ...) serve the paper's analyses.

Readings where the paper is vague (how each was found, and the counts: docs/textnca.md):
- z_bias: the update gate starts with Tallec & Ollivier's chrono bias over the N = K Ts steps, z from
  1/N to 1/2 across dimensions (z_bias_steps fixes N apart from Ts). Zero biases (z = 1/2) pass 2^-N of h_0 to the head and some seeds
  stall; a uniform -2 keeps h_0 but slows every dimension's learning. The spread does neither.
- emb_scale: the literal Eq. 1 is emb_scale=1.0. At nanoGPT's 0.02 init it stays at the unigram loss,
  so by default h_0 and the step embeddings are scaled by sqrt(d) (as Vaswani et al. Sec. 3.4).
- Biases in every Linear and LayerNorm, GELU FFN, nanoGPT init N(0, 0.02): the flagship has
  30,830,592 parameters, Table 7's 30.8M. One LN per cell, between Perceive and FFN (Eq. 2).
- orchestration 'staged' (Sec. 3.2), 'single' (K = 1), 'stacked' (equal windows, Sec. A.5);
  'interleaved': one cell, one Perceive-LN-FFN sub-layer per window in order, then one gate, Ts
  times; 'multi': the same with equal windows (Sec. A.5).
- Learned step embeddings: a table of K * Ts rows; an inference Ts' > Ts reuses each stage's last
  row. Sinusoidal: Vaswani et al.'s sinusoid of n, at the rms of a fresh learned row.
- kernel 'linear': weights 1 + s + s^2/2, normalised, s = q.k / sqrt(d_h) (phi = [1, x, x (x) x
  / sqrt 2]); 'gla' (Eq. 17): Yang et al.'s per-channel gate, the GLA recurrence restricted to the
  window, no normaliser; 'conv': a dense causal Conv1d and a d x d projection (Table 8's 29.0M);
  'dwconv': Sec. A.3's depthwise convolution.
- gate 'sigmoid': h + g (u - h), g = sigmoid(W [h; u]); 'highway': g = sigmoid(W h); 'residual':
  h + u; 'overwrite': u. stochastic_Ts: one Ts per training forward.
- readout_block (Hier-Hybrid, App. B): one causal global-attention pre-norm block before ln_f.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
from torch.utils.checkpoint import checkpoint

INIT_STD = 0.02   # nanoGPT's normal init for every Linear and Embedding

# The GRU update gate's bias at init, for N NCA steps: with z the fraction of h replaced per step (Eq. 8),
# (1 - z)^N of h_0 reaches the head. A number: that bias. 'half': (1 - z)^N = 1/2. 'inv_n': z = 1/N.
# 'chrono': Tallec & Ollivier's chrono init, b = -log U(1, N - 1) per dimension (z from 1/2 to 1/N).
Z_INITS = {
    'half': lambda N, d: torch.full((d,), -math.log(1 / (1 - 0.5 ** (1 / N)) - 1)),
    'inv_n': lambda N, d: torch.full((d,), -math.log(max(N - 1, 1))),
    'chrono': lambda N, d: -torch.log(torch.empty(d).uniform_(1, max(N - 1, 1))),
}


def is_number(text):
    try:
        float(text)
        return True
    except (TypeError, ValueError):
        return False


@dataclass
class TextNCAConfig:
    block_size: int = 512
    vocab_size: int = 32000
    n_embd: int = 512
    n_head: int = 8
    d_ff: int = 2048
    bias: bool = True                 # every Linear and LayerNorm: the flagship's 30,830,592 (Table 7)
    dropout: float = 0.0              # on u, before the gate (Table 5 "SigmoidDropout")
    windows: tuple = (8, 32, 128)     # one window per stage (staged) or sub-layer (interleaved)
    Ts: int = 4                       # iterations per stage
    orchestration: str = 'staged'     # staged | single | stacked | interleaved | multi
    gate: str = 'gru'                 # gru | residual | sigmoid | highway | overwrite
    step_embed: str = 'learned'       # learned | none | sinusoidal
    kernel: str = 'softmax'           # softmax | linear | gla | conv | dwconv
    stochastic_Ts: tuple = ()         # e.g. (2, 4, 6): Ts sampled per batch in training
    grad_checkpoint: bool = False     # recompute each NCA step in backward (Sec. 4.1)
    readout_block: bool = False       # Hier-Hybrid (App. B): one causal global-attention block before ln_f
    emb_scale: float = None           # h_0 and step embeddings times this; None: sqrt(n_embd); 1.0: Eq. 1 literally
    z_bias: str = 'chrono'            # GRU update-gate bias at init: 'chrono', 'half', 'inv_n' or a number ('0': PyTorch's)
    z_bias_steps: int = 0             # the N that z_bias's init is for; 0: n_steps (a Ts sweep with it fixed changes Ts alone)

    def __post_init__(self):
        if isinstance(self.windows, int):
            self.windows = (self.windows,)
        self.windows = tuple(self.windows)
        self.stochastic_Ts = tuple(self.stochastic_Ts)
        w, o = self.windows, self.orchestration
        checks = [
            (o in ('staged', 'single', 'stacked', 'interleaved', 'multi'),
             f"orchestration must be staged|single|stacked|interleaved|multi, got {o!r}"),
            (self.gate in ('gru', 'residual', 'sigmoid', 'highway', 'overwrite'),
             f"gate must be gru|residual|sigmoid|highway|overwrite, got {self.gate!r}"),
            (self.step_embed in ('learned', 'none', 'sinusoidal'),
             f"step_embed must be learned|none|sinusoidal, got {self.step_embed!r}"),
            (self.kernel in ('softmax', 'linear', 'gla', 'conv', 'dwconv'),
             f"kernel must be softmax|linear|gla|conv|dwconv, got {self.kernel!r}"),
            (len(w) >= 1 and all(x >= 1 for x in w), f"windows must be positive, got {w}"),
            (o != 'single' or len(w) == 1, f"orchestration 'single' takes one window, got {w}"),
            (o not in ('stacked', 'multi') or len(set(w)) == 1,
             f"orchestration {o!r} uses one window size repeated, got {w}"),
            (self.Ts >= 1 and all(t >= 1 for t in self.stochastic_Ts), "Ts must be >= 1"),
            (self.n_embd % self.n_head == 0, "n_embd must be a multiple of n_head"),
            (self.z_bias in Z_INITS or is_number(self.z_bias),
             f"z_bias must be a number or one of {'|'.join(Z_INITS)}, got {self.z_bias!r}"),
            (self.z_bias_steps >= 0, f"z_bias_steps must be >= 0 (0: n_steps), got {self.z_bias_steps}"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ValueError(msg)

    @property
    def n_steps(self):  # NCA steps between h_0 and the head at the training Ts
        return self.Ts * (1 if self.orchestration in ('interleaved', 'multi') else len(self.windows))

    @property
    def n_cells(self):  # cells with their own weights
        return 1 if self.orchestration in ('interleaved', 'multi') else len(self.windows)

    @property
    def table_Ts(self):  # learned step-embedding rows per cell
        return max((self.Ts,) + self.stochastic_Ts)


# ----------------------------------------------------------------------------------------
# Perception: causal local kernels over a window of w keys (i-w+1..i)

def taylor2(s):
    """phi(q).phi(k) = 1 + s + s^2 / 2 for phi(x) = [1, x, x (x) x / sqrt 2], s = q.k / sqrt(D)."""
    return 1 + s + 0.5 * s * s


WEIGHTS = {  # attention weights over the keys a query sees (its window)
    'softmax': lambda s: s.softmax(-1),                                   # Eq. 4
    'linear': lambda s: taylor2(s) / taylor2(s).sum(-1, keepdim=True),
}


def local_attention_reference(q, k, v, w, kernel='softmax', log_decay=None):
    """What local_attention and gla_attention compute, one query at a time: query i reads keys
    j = max(0, i-w+1)..i. softmax: Eq. 4; linear: weights 1 + s + s^2/2, normalised; gla: the
    unnormalised (q_i * prod_{s=j+1..i} alpha_s) . k_j / sqrt(D) (Eq. 17, per channel)."""
    D = q.shape[-1]
    y = torch.zeros_like(v)
    for i in range(q.shape[2]):
        j0 = max(0, i - w + 1)
        qi, kw, vw = q[:, :, i:i + 1], k[:, :, j0:i + 1], v[:, :, j0:i + 1]
        s = (qi @ kw.transpose(-1, -2)) / math.sqrt(D)                        # (B, H, 1, keys)
        if kernel in WEIGHTS:
            a = WEIGHTS[kernel](s)
        else:
            C = log_decay[:, :, j0:i + 1].cumsum(2)    # decay_{j->i} = exp(C_i - C_j), per channel
            decay = (C[:, :, -1:] - C).exp()
            a = (qi * decay * kw).sum(-1)[:, :, None] / math.sqrt(D)
        y[:, :, i] = (a @ vw)[:, :, 0]
    return y


def band_chunks(t, c):
    """(B, H, n*c, ...) -> (B, H, n, 2c, ...): each chunk preceded by the previous one
    (zeros before the first)."""
    B, H, L = t.shape[:3]
    t = t.view(B, H, L // c, c, *t.shape[3:])
    prev = torch.cat([torch.zeros_like(t[:, :, :1]), t[:, :, :-1]], dim=2)
    return torch.cat([prev, t], dim=3)


def band_distance(c, device):
    """dist[a, b] = query position - key position, query a of a chunk, key b of [previous, own chunk]."""
    return torch.arange(c, device=device)[:, None] + c - torch.arange(2 * c, device=device)[None, :]


def band_mask(n, c, w, device):
    """allowed[m, a, b]: query a of chunk m may see key b of [chunk m-1, chunk m]."""
    dist = band_distance(c, device)
    allowed = ((dist >= 0) & (dist < w)).expand(n, c, 2 * c)
    first = torch.arange(n, device=device)[:, None, None] == 0
    before_start = torch.arange(2 * c, device=device)[None, None, :] < c
    return allowed & ~(first & before_start)


# On CUDA under torch.compile the window goes to FlexAttention (a fused kernel that skips the blocks
# outside the band); SDPA takes the chunked 5-D form above only through its MATH kernel. Eager,
# flex_attention would build the T x T scores: the chunked form stays the CPU path and the reference.
_BLOCK_MASKS = {}   # (T, w, device) -> BlockMask


def sliding_block_mask(T, w, device):
    """Query i sees keys i-w+1..i, as a FlexAttention block mask, made once per (T, w, device):
    inside a compiled forward the first call traces its creation, the next compiles against it."""
    key = (T, w, str(device))
    if key not in _BLOCK_MASKS:
        def window(b, h, qi, ki):
            return (qi >= ki) & (qi - ki < w)
        _BLOCK_MASKS[key] = create_block_mask(window, None, None, T, T, device=device)
    return _BLOCK_MASKS[key]


def use_flex(q):
    return q.is_cuda and torch.compiler.is_compiling()


def local_attention(q, k, v, w, kernel='softmax', log_decay=None, flex=None):
    """q, k, v: (B, H, T, D). Query i attends to keys max(0, i-w+1)..i, in chunks of c = min(w, T)
    (exactly local_attention_reference). log_decay: (B, H, T, D) log alpha for kernel 'gla'.
    flex: softmax through FlexAttention (None: on CUDA under torch.compile)."""
    if kernel == 'gla':
        return gla_attention(q, k, v, w, log_decay)
    B, H, T, D = q.shape
    if kernel == 'softmax' and (use_flex(q) if flex is None else flex):
        return flex_attention(q, k, v, block_mask=sliding_block_mask(T, w, q.device))
    c = min(w, T)
    n = -(-T // c)
    pad = n * c - T
    q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    qc, kc, vc = q.view(B, H, n, c, D), band_chunks(k, c), band_chunks(v, c)
    allowed = band_mask(n, c, w, q.device)                           # (n, c, 2c)
    if kernel == 'softmax':
        y = F.scaled_dot_product_attention(qc, kc, vc, attn_mask=allowed)
    else:
        s = (qc @ kc.transpose(-1, -2)) * (1.0 / math.sqrt(D))       # (B, H, n, c, 2c)
        a = taylor2(s).masked_fill(~allowed, 0.0)
        y = (a / a.sum(-1, keepdim=True)) @ vc
    return y.reshape(B, H, n * c, D)[:, :, :T]


def gla_attention(q, k, v, w, log_decay, c=16):
    """y_i = sum_{j=i-w+1..i} (q_i * exp(C_i - C_j)) . k_j v_j / sqrt(D), C = cumsum log alpha
    (B, H, T, D): the GLA recurrence S_i = Diag(alpha_i) S_{i-1} + k_i^T v_i restricted to the
    window. Queries go in sub-chunks of c; for one starting at s, keys before s use
    exp(C_i - C_j) = exp(C_i - C_{s-1}) exp(C_{s-1} - C_j), both factors <= 1 (no overflow), and
    the sub-chunk's own keys an explicit (c, c, D) decay. Memory O(T w + T (w / c + c) D)."""
    B, H, T, D = q.shape
    c = min(c, w, T)                 # c <= w: a sub-chunk's own keys all lie in the window
    n = -(-T // c)
    P = -(-(w - 1) // c) * c         # keys before a sub-chunk: w - 1, rounded up to sub-chunks
    q, k, v, log_decay = (F.pad(t, (0, 0, 0, n * c - T)) for t in (q, k, v, log_decay))
    C = log_decay.cumsum(2)          # padded queries keep C_T: exp(C_i - C_j) <= 1 there too
    qb, kb, vb, Cb = (t.view(B, H, n, c, D) for t in (q, k, v, C))
    causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()[:, :, None]
    decay = (Cb[..., :, None, :] - Cb[..., None, :, :]).masked_fill(~causal, float('-inf')).exp()
    y = torch.einsum('...id,...ijd,...jd->...ij', qb, decay.to(q.dtype), kb) @ vb
    if P:
        def before(t):               # (B, H, n, P, D): the P positions before each sub-chunk
            return F.pad(t, (0, 0, P, 0)).unfold(2, P, c)[:, :, :n].transpose(-1, -2)
        ref = F.pad(C, (0, 0, 1, 0))[:, :, 0:n * c:c, None]          # C_{s-1}, C_{-1} = 0
        qt = qb * (Cb - ref).exp().to(q.dtype)
        kt = before(k) * (ref - before(C)).exp().to(q.dtype)
        dist = torch.arange(c, device=q.device)[:, None] + P - torch.arange(P, device=q.device)
        y = y + (qt @ kt.transpose(-1, -2)).masked_fill(dist >= w, 0.0) @ before(v)
    return (y * (1.0 / math.sqrt(D))).reshape(B, H, n * c, D)[:, :, :T]


class LocalAttention(nn.Module):
    """Perceive for kernels 'softmax' (Eq. 4) and 'linear': attention over the w most recent
    positions, one c_attn for q, k, v and an output projection."""

    def __init__(self, cfg, w):
        super().__init__()
        self.w, self.kernel, self.n_head = w, cfg.kernel, cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)

    def qkv(self, x):  # (B, T, C) -> q, k, v (B, H, T, D)
        B, T, C = x.shape
        return self.c_attn(x).view(B, T, 3, self.n_head, C // self.n_head).permute(2, 0, 3, 1, 4)

    def out(self, y):  # (B, H, T, D) -> (B, T, C)
        B, H, T, D = y.shape
        return self.c_proj(y.transpose(1, 2).reshape(B, T, H * D))

    def forward(self, x):
        q, k, v = self.qkv(x)
        return self.out(local_attention(q, k, v, self.w, self.kernel))

    def step(self, x, cache):
        """Incremental decode of one position, x: (B, 1, C); cache keeps the last w keys and values."""
        q, k, v = self.qkv(x)
        if 'k' in cache:
            k, v = torch.cat([cache['k'], k], 2)[:, :, -self.w:], torch.cat([cache['v'], v], 2)[:, :, -self.w:]
        cache['k'], cache['v'] = k, v
        s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))  # (B, H, 1, S)
        return self.out(WEIGHTS[self.kernel](s) @ v)


class GatedLinearAttention(LocalAttention):
    """Perceive for kernel 'gla' (Eq. 17, Yang et al.'s data-dependent gate): one decay per key
    channel, alpha = sigmoid(x W_1 W_2 + b)^(1/16), W_1 W_2 of rank 16, inside the window w."""

    def __init__(self, cfg, w):
        super().__init__(cfg, w)
        self.g_1 = nn.Linear(cfg.n_embd, 16, bias=False)
        self.g_2 = nn.Linear(16, cfg.n_embd)

    def reset_gla(self):  # after _init_weights: alpha^(w-1) = 1/e at init
        nn.init.constant_(self.g_2.bias, -math.log(math.expm1(16.0 / max(self.w - 1, 1))))

    def log_alpha(self, x):  # (B, H, T, D)
        B, T, C = x.shape
        a = self.g_2(self.g_1(x)).float()
        return (F.logsigmoid(a) / 16).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)

    def forward(self, x):
        q, k, v = self.qkv(x)
        return self.out(gla_attention(q, k, v, self.w, self.log_alpha(x)))

    def step(self, x, cache):
        q, k, v = self.qkv(x)
        ld = self.log_alpha(x)
        if 'k' in cache:
            k, v = torch.cat([cache['k'], k], 2)[:, :, -self.w:], torch.cat([cache['v'], v], 2)[:, :, -self.w:]
            ld = torch.cat([cache['ld'], ld], 2)[:, :, -self.w:]
        cache['k'], cache['v'], cache['ld'] = k, v, ld
        after = ld.flip(2).cumsum(2).flip(2) - ld   # C_i - C_j: log alpha summed over j+1..i, per channel
        a = (q * after.exp().to(q.dtype) * k).sum(-1)[:, :, None] * (1.0 / math.sqrt(q.shape[-1]))
        return self.out(a @ v)


class CausalConv(nn.Module):
    """Perceive for kernels 'conv' (a dense causal Conv1d of width w, then a d x d projection:
    Table 8's 29.0M) and 'dwconv' (Sec. A.3's depthwise Conv1d alone)."""

    def __init__(self, cfg, w):
        super().__init__()
        d, self.w = cfg.n_embd, w
        self.conv = nn.Conv1d(d, d, w, groups=d if cfg.kernel == 'dwconv' else 1, bias=cfg.bias)
        self.c_proj = nn.Linear(d, d, bias=cfg.bias) if cfg.kernel == 'conv' else None

    def forward(self, x):
        y = self.conv(F.pad(x.transpose(1, 2), (self.w - 1, 0))).transpose(1, 2)   # (B, C, w-1+T) -> (B, T, C)
        return y if self.c_proj is None else self.c_proj(y)

    def step(self, x, cache):
        """Incremental decode of one position, x: (B, 1, C); cache keeps the last w inputs."""
        xs = torch.cat([cache['x'], x], 1)[:, -self.w:] if 'x' in cache else x
        cache['x'] = xs
        return self.forward(xs)[:, -1:]


PERCEIVE = {'softmax': LocalAttention, 'linear': LocalAttention, 'gla': GatedLinearAttention,
            'conv': CausalConv, 'dwconv': CausalConv}


def Perceive(cfg, w):
    """The perception of one sub-layer over a causal window of w positions, for cfg.kernel."""
    return PERCEIVE[cfg.kernel](cfg, w)


# ----------------------------------------------------------------------------------------
# The NCA cell: u = FFN(LN(Perceive(h + s))), h = Gate(h, u)

class SubLayer(nn.Module):

    def __init__(self, cfg, w):
        super().__init__()
        self.perceive = Perceive(cfg, w)
        self.ln = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.c_fc = nn.Linear(cfg.n_embd, cfg.d_ff, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.d_ff, cfg.n_embd, bias=cfg.bias)

    def forward(self, x, cache=None):
        p = self.perceive(x) if cache is None else self.perceive.step(x, cache)
        return self.c_proj(F.gelu(self.c_fc(self.ln(p))))              # (B, T, d_ff) -> (B, T, C)


class Gate(nn.Module):

    def __init__(self, cfg):
        super().__init__()
        self.kind = cfg.gate
        d = cfg.n_embd
        if self.kind == 'gru':
            self.W_zr = nn.Linear(2 * d, 2 * d, bias=cfg.bias)   # W_z, W_r (Eq. 5, 6)
            self.W_h = nn.Linear(2 * d, d, bias=cfg.bias)        # Eq. 7
        elif self.kind == 'sigmoid':
            self.W_g = nn.Linear(2 * d, d, bias=cfg.bias)
        elif self.kind == 'highway':
            self.W_g = nn.Linear(d, d, bias=cfg.bias)

    def reset_z(self, cfg):  # after _init_weights: the update gate's half of W_zr's bias
        if self.kind != 'gru' or self.W_zr.bias is None:
            return
        d, b = cfg.n_embd, cfg.z_bias
        with torch.no_grad():
            self.W_zr.bias[:d] = Z_INITS[b](cfg.z_bias_steps or cfg.n_steps, d) if b in Z_INITS else float(b)

    def forward(self, h, u, want_gates=False):
        gates = {}
        if self.kind == 'gru':
            z, r = torch.sigmoid(self.W_zr(torch.cat([h, u], -1))).chunk(2, -1)
            h_cand = torch.tanh(self.W_h(torch.cat([r * h, u], -1)))
            h_new = h + z * (h_cand - h)                         # (1 - z) h + z h_cand, Eq. 8
            gates = {'update': z, 'reset': r}
        elif self.kind in ('sigmoid', 'highway'):
            g = torch.sigmoid(self.W_g(torch.cat([h, u], -1) if self.kind == 'sigmoid' else h))
            h_new = h + g * (u - h)                              # g u + (1 - g) h
            gates = {'update': g}
        elif self.kind == 'residual':
            h_new = h + u
        else:
            h_new = u
        return (h_new, gates) if want_gates else h_new


class Cell(nn.Module):
    """One weight set: sub-layers (one per window; staged cells have one) and one gate."""

    def __init__(self, cfg, windows):
        super().__init__()
        self.subs = nn.ModuleList([SubLayer(cfg, w) for w in windows])
        self.gate = Gate(cfg)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, h, s, caches=None, want_gates=False):
        x = h if s is None else h + s
        for j, sub in enumerate(self.subs):
            x = sub(x, None if caches is None else caches[j])
        return self.gate(h, self.drop(x), want_gates)


class Readout(nn.Module):
    """Hier-Hybrid (App. B): one pre-norm Transformer block, causal attention over the whole
    prefix plus FFN, between the last NCA step and ln_f. Decode keeps every key and value."""

    def __init__(self, cfg):
        super().__init__()
        d, self.n_head = cfg.n_embd, cfg.n_head
        self.ln_1 = nn.LayerNorm(d, bias=cfg.bias)
        self.c_attn = nn.Linear(d, 3 * d, bias=cfg.bias)
        self.attn_proj = nn.Linear(d, d, bias=cfg.bias)
        self.ln_2 = nn.LayerNorm(d, bias=cfg.bias)
        self.c_fc = nn.Linear(d, cfg.d_ff, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.d_ff, d, bias=cfg.bias)

    def forward(self, h, cache=None):
        B, T, C = h.shape
        qkv = self.c_attn(self.ln_1(h)).view(B, T, 3, self.n_head, C // self.n_head)   # (B, T, 3, H, C / H)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)                                           # (B, H, T, C / H) each
        if cache is not None:  # one new position: it sees every cached key
            if 'k' in cache:
                k, v = torch.cat([cache['k'], k], 2), torch.cat([cache['v'], v], 2)
            cache['k'], cache['v'] = k, v
        y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
        h = h + self.attn_proj(y.transpose(1, 2).reshape(B, T, C))   # (B, H, T, C / H) -> (B, T, C)
        return h + self.c_proj(F.gelu(self.c_fc(self.ln_2(h))))


# ----------------------------------------------------------------------------------------

@torch.compiler.disable  # a Python int: torch.compile keeps one graph per Ts value
def draw(choices, seeds=None):
    """One of choices: from the generator of the batch's first sequence seed where the trainer
    passes seeds (a function of the iteration, not of the process), else torch's global one."""
    g = None if seeds is None else torch.Generator().manual_seed(int(seeds[0]))
    return choices[int(torch.randint(len(choices), (), generator=g))]


class TextNCA(nn.Module):
    knobs = decode_knobs = ('Ts',)   # the runtime controls of forward and decode

    def __init__(self, config):
        super().__init__()
        cfg = self.config = config
        d = cfg.n_embd
        self.wte = nn.Embedding(cfg.vocab_size, d)
        self.wpe = nn.Embedding(cfg.block_size, d)
        if cfg.orchestration in ('interleaved', 'multi'):
            self.cells = nn.ModuleList([Cell(cfg, cfg.windows)])
        else:
            self.cells = nn.ModuleList([Cell(cfg, (w,)) for w in cfg.windows])
        self.steps = nn.Parameter(torch.empty(cfg.n_cells * cfg.table_Ts, d)) if cfg.step_embed == 'learned' else None
        self.readout = Readout(cfg) if cfg.readout_block else None
        self.ln_f = nn.LayerNorm(d, bias=cfg.bias)
        self.lm_head = nn.Linear(d, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight
        self.apply(self._init_weights)
        if self.steps is not None:
            nn.init.normal_(self.steps, std=INIT_STD)
        # sqrt(d): h_0 at the scale of the GRU's tanh candidate, else the model sits at the unigram loss (docs/textnca.md)
        self.emb_scale = math.sqrt(d) if cfg.emb_scale is None else cfg.emb_scale
        self.last_Ts = cfg.Ts

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
            if getattr(module, 'bias', None) is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, GatedLinearAttention):
            module.reset_gla()
        elif isinstance(module, Gate):
            module.reset_z(self.config)

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self, seq_len):
        cfg = self.config
        matmul, attn = cfg.n_embd * cfg.vocab_size, 0
        for k, _ in self.plan(cfg.Ts):
            cell = self.cells[k]
            matmul += sum(m.weight.numel() for m in cell.modules() if isinstance(m, (nn.Linear, nn.Conv1d)))
            if cfg.kernel not in ('conv', 'dwconv'):
                attn += sum(12 * cfg.n_embd * min(sub.perceive.w, seq_len) for sub in cell.subs)
        if self.readout is not None:
            matmul += sum(m.weight.numel() for m in self.readout.modules() if isinstance(m, nn.Linear))
            attn += 12 * cfg.n_embd * seq_len
        return 6 * matmul + attn

    # the NCA schedule ------------------------------------------------------------------

    def plan(self, Ts):
        """[(cell k, iteration t)] for every NCA step, in order: stage by stage (Eq. 9)."""
        return [(k, t) for k in range(len(self.cells)) for t in range(Ts)]

    def step_embedding(self, k, t, Ts, device):
        cfg = self.config
        if cfg.step_embed == 'none':
            return None
        if cfg.step_embed == 'learned':  # row (k-1)Ts + t; beyond the table: the stage's last row
            return self.steps[k * cfg.table_Ts + min(t, cfg.table_Ts - 1)] * self.emb_scale
        n, d = k * Ts + t, cfg.n_embd
        inv_freq = torch.exp(torch.arange(0, d, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / d))
        sinusoid = torch.stack([torch.sin(n * inv_freq), torch.cos(n * inv_freq)], -1).view(d)
        return sinusoid * (INIT_STD * math.sqrt(2) * self.emb_scale)   # the rms of a fresh embedding row

    def choose_Ts(self, Ts, seeds=None):
        cfg = self.config
        if Ts is None:
            if self.training and cfg.stochastic_Ts:
                Ts = draw(cfg.stochastic_Ts, seeds)
            else:
                Ts = cfg.Ts
        if Ts < 1:
            raise ValueError(f"Ts must be >= 1, got {Ts}")
        self.last_Ts = Ts
        return Ts

    def embed(self, idx, pos0=0):  # idx (B, T) -> h_0 (B, T, C)
        T = idx.shape[1]
        if pos0 + T > self.config.block_size:
            raise ValueError(f"sequence of length {pos0 + T} is longer than block_size {self.config.block_size}")
        return (self.wte(idx) + self.wpe(torch.arange(pos0, pos0 + T, device=idx.device))) * self.emb_scale

    def nca_steps(self, idx, Ts=None, want_gates=False):
        """Yields (k, t, h after the step, gates) for every NCA step."""
        Ts = self.choose_Ts(Ts)
        h = self.embed(idx)
        ckpt = self.config.grad_checkpoint and self.training and torch.is_grad_enabled()
        for k, t in self.plan(Ts):
            s = self.step_embedding(k, t, Ts, idx.device)
            gates = {}
            if want_gates:
                h, gates = self.cells[k](h, s, want_gates=True)
            elif ckpt:
                h = checkpoint(self.cells[k], h, s, use_reentrant=False)
            else:
                h = self.cells[k](h, s)
            yield k, t, h, gates

    def head(self, h, cache=None):
        if self.readout is not None:  # the logit lens (step_logits...) reads every state through it
            h = self.readout(h, cache)
        return self.lm_head(self.ln_f(h))                                   # (B, T, vocab)

    def forward(self, idx, targets=None, Ts=None, seeds=None):
        Ts = self.choose_Ts(Ts, seeds)  # here: a graph break inside the generator would split every step
        for _, _, h, _ in self.nca_steps(idx, Ts):
            pass
        logits = self.head(h)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    def train_stats(self):
        return {'Ts': float(self.last_Ts)}

    # interpretability (paper Fig. 8, 10, 13) -------------------------------------------

    def step_names(self, Ts=None):
        Ts = self.config.Ts if Ts is None else Ts
        return ['emb'] + [f'S{k + 1}.{t + 1}' for k, t in self.plan(Ts)]

    @torch.no_grad()
    def step_logits(self, idx, Ts=None):
        """Logits (B, T, V) of the shared LN + head applied to h_0 and after every NCA step:
        a list of 1 + len(windows) * Ts tensors (interleaved: 1 + Ts); the last is forward's."""
        out = [self.head(self.embed(idx))]
        for _, _, h, _ in self.nca_steps(idx, Ts):
            out.append(self.head(h))
        return out

    @torch.no_grad()
    def step_losses(self, idx, targets, Ts=None):
        """Next-token cross-entropy (mean over tokens, ignore_index=-1) of h_0 and of every
        NCA step, as step_logits but one step at a time: a (1 + steps,) float tensor."""
        def ce(h):
            logits = self.head(h)
            return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        losses = [ce(self.embed(idx))]
        for _, _, h, _ in self.nca_steps(idx, Ts):
            losses.append(ce(h))
        return torch.stack(losses)

    @torch.no_grad()
    def gate_stats(self, idx, Ts=None):
        """Per NCA step: mean and std over hidden dims of the per-dim mean (over batch and
        positions) of the GRU update gate z and reset gate r (Fig. 10). Sigmoid/highway
        gates report their g as 'update'. Returns {'steps': names, 'update_mean': (N,),
        'update_std', 'reset_mean', 'reset_std'} (tensors; reset_* absent without reset)."""
        if self.config.gate not in ('gru', 'sigmoid', 'highway'):
            raise ValueError(f"gate {self.config.gate!r} has no gates to report")
        stats = {}
        for _, _, _, gates in self.nca_steps(idx, Ts, want_gates=True):
            for name, g in gates.items():
                per_dim = g.float().mean(dim=(0, 1))
                stats.setdefault(f'{name}_mean', []).append(per_dim.mean())
                stats.setdefault(f'{name}_std', []).append(per_dim.std())
        out = {key: torch.stack(v) for key, v in stats.items()}
        out['steps'] = self.step_names(self.last_Ts)[1:]
        return out

    # incremental decode: each NCA step keeps the last w keys/values of each sub-layer -----

    def decode_init(self, batch_size, device, Ts=None):
        Ts = self.config.Ts if Ts is None else Ts
        plan = self.plan(Ts)
        return {'pos': 0, 'Ts': Ts, 'caches': [[{} for _ in self.cells[k].subs] for k, _ in plan], 'readout': {}}

    @torch.no_grad()
    def decode_step(self, idx_t, state, Ts=None):
        Ts = state['Ts'] if Ts is None else Ts
        if Ts != state['Ts']:
            raise ValueError(f"decode state was made for Ts={state['Ts']}, got Ts={Ts}")
        idx = idx_t.view(-1, 1)
        h = self.embed(idx, state['pos'])
        for (k, t), caches in zip(self.plan(Ts), state['caches']):
            h = self.cells[k](h, self.step_embedding(k, t, Ts, idx.device), caches)
        state['pos'] += 1
        return self.head(h, state['readout'])[:, -1], state
