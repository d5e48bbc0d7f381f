"""
FON: A Draft-Revise Dual-Organ Language Model without Sequence-Level Quadratic Attention
Helong Hu, Hongdan Pan, Shuiqing Hu (arXiv 2610.16301)

One weight stack, two organs. In the order forward computes them:

    h = e + sum_{k<8} P[k] * e[p - k],   e = E(x)                    local position kernel
  drafting organ, per layer; the trunk of L layers runs r times (T1, T2) (Sec. 3.2, Methods):
    lambda_m(x) = exp(-softplus(rho_m + W_lambda x)),  n = 16 taps with learnable delays d_m
    S[p] = sum_m lambda_m(x[p]) S[p - d_m] + B(x[p]) x[p],    y[p] = C(x[p]) S[p]
    h = LN(h + y),  h = LN(h + FFN(h))                 mixing -> Add & Norm -> FFN -> Add & Norm
  revision organ, after every drafting layer (Sec. 3.3, 3.4):
    ripple(h)[p] = sum_{s in (8, 32)} w_s Conv_s(LN(h))[p],  a stack of K = 2 such layers
    h = h + gate * (ripple(h) + gamma addr(h)),  gate = 0.02 at init
  logits = head(LN(h)),  head tied to E
Ripples are causal at non-hole positions and bidirectional at holes; gamma content addressing
(keys and values are token embeddings) runs at holes only.

Readings where the paper is vague (each fits its sizes, Table 2, and its stated properties; how
each was found, the counts and the FLOPs ledger: docs/fon.md):
- B(x) x = (W_B x) * (W_u x), C(x) S = W_o((W_C x) * S): content-dependent diagonal maps on a state
  of width D = 2d (Mamba-like linear B, C).
- lambda_m is one scalar per tap and position, shared by the channels: the recursion is one unit
  lower-triangular system per sequence, solved exactly by one triangular solve per chunk of
  c = max_delay + 1 positions (delay_scan; delay_scan_reference is the loop).
- Delays d_m = max_delay^sigmoid(z_m) in (1, max_delay); S[p - d_m] interpolates linearly between
  the integer shifts. Init 2^(m/2) (tap 0: 2^(1/4)); z_m learns at delay_lr_scale x the rate.
- rho starts at sum_m lambda_m = 0.9 < 1 (a contraction, for length extrapolation); W_lambda = 0.
- Conv_s(z) = W_s (a_s * z) + b_s: a temporal kernel of width s shared by the channels and a d x d
  channel map; holes use a centred kernel of their own. One revision organ serves every layer.
- gamma is a fixed dose (0.1); the query is the hole's hidden state, keys = values = the token
  embeddings within +-addr_window/2 of the hole, the hole excluded.
- Holes live in a second stream that reads the causal stream and is never read back, so no hole's
  bidirectional state reaches a non-hole position (Sec. 4.4).
- coupling AR = drafting only; OD = revision in the hole stream only; PC = the causal ripple also
  revises the causal stream. Every variant builds the revision organ: coupling is a forward knob.
- num_params() counts the tied embedding once; Table 2's counts are state_dict sums (V d twice).
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class FONConfig:
    block_size: int = 256          # training length (nothing in the model is tied to it)
    vocab_size: int = 50304
    n_layer: int = 4               # L drafting layers
    n_embd: int = 256              # d
    expand: int = 2                # state width D = expand * d
    n_taps: int = 16               # n delay taps
    max_delay: int = 255           # delays live in [1, max_delay]; chunk length = max_delay + 1
    pos_kernel: int = 8            # width of the local position kernel (0: off)
    num_recur: int = 1             # trunk recursion r: T1 = 1, T2 = 2
    d_ff: int = None               # None: 4 * d
    coupling: str = 'PC'           # 'AR' | 'OD' | 'PC'
    n_ripple: int = 2              # K ripple layers
    ripple_widths: tuple = (8, 32)
    gate_init: float = 0.02
    gamma: float = 0.1
    addr_window: int = 32
    lambda_sum_init: float = 0.9   # sum_m lambda_m at initialisation
    bias: bool = True
    dropout: float = 0.0
    tie_weights: bool = True       # Methods: "Embedding and output head shared"
    delay_lr_scale: float = 10.0   # the delay logits' learning rate / the others'
    emb_scale: float = 1.0         # h_0 = emb_scale (e + pos kernel); sqrt(d) is Vaswani et al.'s tied-embedding scale

    def __post_init__(self):
        self.d_ff = self.d_ff or 4 * self.n_embd
        self.ripple_widths = tuple(self.ripple_widths)
        if self.coupling not in ('AR', 'OD', 'PC'):
            raise ValueError(f"coupling must be AR|OD|PC, got {self.coupling!r}")
        if self.max_delay < 1:
            raise ValueError(f"max_delay must be >= 1, got {self.max_delay}")


# ----------------------------------------------------------------------------- delay recursion
def delay_scan_reference(lam, U, delays, max_delay, S_read=None):
    """The drafting recursion as written, one position at a time (float64): S[p] = sum_m lam_m[p]
    S[p - d_m] + U[p] (U = B(x) x), S[p - d] read between the integer shifts floor(d) and
    floor(d) + 1 (weights 1 - f, f), zero before the start. lam (B, T, n), U (B, T, D).
    S_read given: the taps read it instead of S (the hole stream, delay_read). lag_weights, skew
    and delay_scan below compute the same as one triangular solve per chunk."""
    d = delays.detach().double().clamp(1, max_delay)
    S = []
    src = S if S_read is None else S_read.double().unbind(1)
    for p in range(U.shape[1]):
        acc = U[:, p].double()
        for m in range(len(d)):
            k0 = int(d[m].floor())
            f = float(d[m] - k0)
            for k, w in ((k0, 1 - f), (k0 + 1, f)):
                if p - k >= 0:
                    acc = acc + lam[:, p, m:m + 1].double() * w * src[p - k]
        S.append(acc)
    return torch.stack(S, 1)


def lag_weights(delays, c, max_delay):
    """W[m, k-1] = weight of S[p - k] in the read of tap m, lags k = 1..c: linear interpolation
    between the integer shifts floor(d_m) and floor(d_m) + 1 (differentiable in d_m). Lags past c
    are dropped: callers use c < max_delay + 1 only when the whole sequence is shorter than c."""
    d = delays.clamp(1, max_delay)
    k0 = d.detach().floor()
    f = (d - k0)[:, None]
    lags = torch.arange(1, c + 1, device=delays.device, dtype=delays.dtype)
    return (1 - f) * (lags == k0[:, None]) + f * (lags == k0[:, None] + 1)


def skew(coef):
    """coef (..., c, c) indexed [row r, lag k-1] -> A (..., c, 2c): A[r, r + c - k] = coef[r, k-1].
    Columns 0..c-1 are the previous chunk, c..2c-1 this chunk (strictly below the diagonal)."""
    c = coef.shape[-1]
    x = F.pad(coef.flip(-1), (0, c + 1))
    return x.flatten(-2)[..., :2 * c * c].unflatten(-1, (c, 2 * c))


def delay_scan(A, U):
    """Solves S[p] = U[p] + sum_q A[p, q] S[q], i.e. (I - A) S = U, chunk by chunk. A (B, nc, c, 2c)
    from skew, U (B, nc, c, D). Within a chunk I - A is unit lower triangular (every delay >= 1);
    a chunk reads only itself and the one before (every delay <= c), so there are nc - 1
    sequential steps, each an exact triangular solve."""
    c = A.shape[-2]
    minus_A = -A   # = I - A below the diagonal; solve_triangular(unitriangular) takes the diagonal as 1
    S, prev = [], None
    for i in range(A.shape[1]):
        rhs = U[:, i] if prev is None else U[:, i] + A[:, i, :, :c] @ prev
        prev = torch.linalg.solve_triangular(minus_A[:, i, :, c:], rhs, upper=False, unitriangular=True)
        S.append(prev)
    return torch.stack(S, 1)


def delay_read(A, U, S):
    """The hole stream: S_h[p] = U_h[p] + sum_q A_h[p, q] S[q] over the causal stream's states S
    (B, nc, c, D); a plain product, nothing recurs on S_h."""
    prev = F.pad(S, (0, 0, 0, 0, 1, 0))[:, :-1]                   # the chunk before (zeros first)
    return U + A @ torch.cat([prev, S], 2)


def pad_chunks(x, nc, c):
    B, T = x.shape[:2]
    if nc * c != T:
        x = F.pad(x, (0, 0, 0, nc * c - T))
    return x.view(B, nc, c, x.shape[-1])


def init_delays(n, max_delay):
    """d_m = 2^(m/2) for m >= 1 and 2^(1/4) for tap 0: a geometric grid from 1 up to 2^((n-1)/2)
    (181 for n = 16), or up to 3/4 of max_delay when that is smaller."""
    top = max(1.0, min(2 ** ((n - 1) / 2), 0.75 * max_delay))
    m = torch.arange(n, dtype=torch.float32)
    m[0] = 0.5
    return top ** (m / max(n - 1, 1))


class DelayMixer(nn.Module):
    """The drafting organ's mixing operator: S[p] = sum_m lambda_m(x[p]) S[p - d_m] + B(x[p]) x[p],
    y[p] = C(x[p]) S[p]. The delays are d_m = max_delay^sigmoid(z_m), in (1, max_delay)."""

    def __init__(self, cfg):
        super().__init__()
        d, D, n = cfg.n_embd, cfg.expand * cfg.n_embd, cfg.n_taps
        self.c = cfg.max_delay + 1
        self.in_proj = nn.Linear(d, 3 * D, bias=cfg.bias)          # W_u, W_B, W_C
        self.lam = nn.Linear(d, n)                                 # W_lambda (zero init), bias = rho
        self.delay_logit = nn.Parameter(torch.empty(n))            # z_m
        self.out_proj = nn.Linear(D, d, bias=cfg.bias)
        self.lambda_sum_init = cfg.lambda_sum_init

    @property
    def delays(self):
        return float(self.c - 1) ** torch.sigmoid(self.delay_logit)

    @torch.no_grad()
    def set_delays(self, d):
        """z_m for given delays d_m in (1, max_delay) (with max_delay 1 every delay is 1)."""
        s = d.log() / math.log(self.c - 1) if self.c > 2 else torch.full_like(d, 0.5)
        self.delay_logit.copy_(torch.logit(s.clamp(1e-6, 1 - 1e-6)))

    def init_special(self):
        n = self.delay_logit.numel()
        self.set_delays(init_delays(n, self.c - 1))
        with torch.no_grad():
            lam0 = self.lambda_sum_init / n                        # exp(-softplus(rho)) = lam0
            self.lam.weight.zero_()
            self.lam.bias.fill_(math.log(math.expm1(-math.log(lam0))))

    def coeffs(self, x):
        """lambda_m(x), U = B(x) x and the readout gate C(x) = W_C x, each per position."""
        u, B_x, C_x = self.in_proj(x).chunk(3, dim=-1)
        lam = torch.exp(-F.softplus(self.lam(x)))
        return lam, B_x * u, C_x

    def forward(self, x, S_causal=None):
        """x (B, T, d). Causal stream: S_causal None, returns (y, S) with S (B, nc, c, D).
        Hole stream: reads S_causal at the delays, returns (y, S_causal)."""
        B, T, _ = x.shape
        lam, U, C_x = self.coeffs(x)                                         # (B, T, n), (B, T, D), (B, T, D)
        c = min(self.c, T)
        nc = -(-T // c)
        # the recursion runs in fp32 (no bf16 triangular solve, and it wants the precision)
        with torch.autocast(x.device.type, enabled=False):
            A = skew(pad_chunks(lam.float(), nc, c) @ lag_weights(self.delays.float(), c, self.c - 1))  # (B, nc, c, 2c)
            U = pad_chunks(U.float(), nc, c)                                 # (B, nc, c, D)
            S = delay_scan(A, U) if S_causal is None else delay_read(A, U, S_causal)   # (B, nc, c, D)
        y = self.out_proj(C_x * S.view(B, nc * c, -1)[:, :T].to(x.dtype))    # (B, T, D) -> (B, T, d)
        return y, (S if S_causal is None else S_causal)

    def step(self, x, ring, t):
        """Position t: x (B, d); ring (B, c, D) holds S[tau] in slot tau % c for the last c
        positions (zeros before the start). Reads the 2n interpolated taps, writes slot t % c."""
        lam, U, C_x = self.coeffs(x)
        d = self.delays.float().clamp(1, self.c - 1)
        k0 = d.floor()
        lags = torch.cat([k0, k0 + 1]).long()
        w = torch.cat([1 - (d - k0), d - k0])
        coef = lam.float().repeat(1, 2) * w                                  # (B, 2n)
        S = (coef.unsqueeze(1) @ ring[:, (t - lags) % self.c]).squeeze(1) + U.float()
        ring[:, t % self.c] = S
        return self.out_proj(C_x * S.to(x.dtype))


class FFN(nn.Module):

    def __init__(self, cfg):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, cfg.d_ff, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.d_ff, cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))          # (B, T, d_ff) -> (B, T, d)


class DraftLayer(nn.Module):
    """mixing -> Add & Norm -> FFN -> Add & Norm (post-norm, Fig. 2b)."""

    def __init__(self, cfg):
        super().__init__()
        self.mix = DelayMixer(cfg)
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.ffn = FFN(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x, S_causal=None):
        y, S = self.mix(x, S_causal)
        x = self.ln_1(x + self.dropout(y))
        return self.ln_2(x + self.ffn(x)), S

    def step(self, x, ring, t):
        x = self.ln_1(x + self.mix.step(x, ring, t))
        return self.ln_2(x + self.ffn(x))


# ----------------------------------------------------------------------------- revision organ
def chunk_conv_reference(z, kernels, causal):
    """Each temporal kernel a (width s) along time, one position and lag at a time: causal
    out[p] = sum_{k<s} a[k] z[p-k]; bidirectional (holes), centred, out[p] = sum_{j<s} a[j]
    z[p + j - s//2]; zero outside the sequence. z (B, T, d) -> (B, T, len(kernels) * d), what
    chunk_conv(z, ripple_matrices(kernels, c, causal), len(kernels), causal) computes."""
    T = z.shape[1]
    outs = []
    for a in kernels:
        s = a.numel()
        out = torch.zeros_like(z)
        for p in range(T):
            for j in range(s):
                q = p - j if causal else p + j - s // 2
                if 0 <= q < T:
                    out[:, p] += a[j] * z[:, q]
        outs.append(out)
    return torch.cat(outs, -1)


def ripple_matrices(kernels, c, causal):
    """The temporal kernels as chunk matrices K (n_w * c, W) acting on a window of chunks.
    Causal, W = 2c (previous chunk, own chunk): out[p] = sum_{k<s} a[k] z[p-k]. Bidirectional,
    W = 3c (previous, own, next chunk), centred: out[p] = sum_{j<s} b[j] z[p + j - s//2]."""
    r = torch.arange(c, device=kernels[0].device)[:, None]
    q = torch.arange((2 if causal else 3) * c, device=r.device)[None, :]
    off = q - c - r                                        # key position - query position
    Ks = []
    for a in kernels:
        s = a.numel()
        k = -off if causal else off + s // 2
        # a one-hot product, not a[k]: inductor (torch 2.11, CUDA) fails to compile that gather
        onehot = k == torch.arange(s, device=r.device)[:, None, None]    # (s, c, W); none where k is out of range
        Ks.append((a @ onehot.flatten(1).to(a.dtype)).view(k.shape))
    return torch.cat(Ks, 0)


def chunk_conv(z, K, n_w, causal):
    """z (B, T, d) -> (B, T, n_w * d): every kernel of K applied along time, one matmul per chunk
    window (cost O(T c d), not O(T^2 d))."""
    B, T, d = z.shape
    c = K.shape[0] // n_w
    nc = -(-T // c)
    zc = F.pad(z, (0, 0, 0, nc * c - T)).view(B, nc, c, d)
    win = [F.pad(zc, (0, 0, 0, 0, 1, 0))[:, :-1], zc]
    if not causal:
        win.append(F.pad(zc, (0, 0, 0, 0, 0, 1))[:, 1:])
    out = K.to(z.dtype) @ torch.cat(win, 2)                                 # (B, nc, n_w * c, d)
    out = out.view(B, nc, n_w, c, d).permute(0, 1, 3, 2, 4).reshape(B, nc * c, n_w * d)
    return out[:, :T]


class Ripple(nn.Module):
    """ripple(h)[p] = sum_s w_s Conv_s(LN(h))[p], Conv_s(z) = W_s (a_s * z) + b_s: a temporal
    kernel of width s shared by the channels, then a channel map W_s. The kernel is a_s (lags
    0..s-1) at non-hole positions and its own centred b_s (offsets -s/2..s/2-1) at holes."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg.n_embd
        self.widths = cfg.ripple_widths
        self.ln = nn.LayerNorm(d, bias=cfg.bias)
        self.kernels = nn.ParameterList([nn.Parameter(torch.full((s,), 1.0 / s)) for s in self.widths])
        self.kernels_bi = nn.ParameterList([nn.Parameter(torch.full((s,), 1.0 / s)) for s in self.widths])
        self.w = nn.Parameter(torch.ones(len(self.widths)))
        self.proj = nn.Linear(len(self.widths) * d, d, bias=False)          # [W_8 W_32]
        self.conv_bias = nn.Parameter(torch.zeros(len(self.widths), d))     # b_s

    def forward(self, h, causal):
        kernels = self.kernels if causal else self.kernels_bi
        K = ripple_matrices([w * a for w, a in zip(self.w, kernels)], max(self.widths), causal)
        z = chunk_conv(self.ln(h), K, len(self.widths), causal)              # (B, T, n_w d)
        return self.proj(z) + self.w @ self.conv_bias                        # (B, T, d)

    def step(self, h, buf):
        """One causal position: h (B, d); buf (B, max_s - 1, d) = the last LN(h) values."""
        win = torch.cat([buf, self.ln(h).unsqueeze(1)], 1)                 # oldest .. newest
        conv = [w * (a.flip(0)[:, None] * win[:, win.shape[1] - a.numel():]).sum(1)
                for w, a in zip(self.w, self.kernels)]
        return self.proj(torch.cat(conv, -1)) + self.w @ self.conv_bias, win[:, 1:]


class Revision(nn.Module):
    """K ripple layers + gamma content addressing; one instance revises after every layer."""

    def __init__(self, cfg):
        super().__init__()
        self.ripples = nn.ModuleList([Ripple(cfg) for _ in range(cfg.n_ripple)])
        self.addr_out = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)     # W_o
        self.gate = nn.Parameter(torch.full((cfg.n_embd,), cfg.gate_init))
        self.gamma, self.window = cfg.gamma, cfg.addr_window

    def ripple(self, h, causal):
        for rip in self.ripples:
            h = rip(h, causal)
        return h

    def addr(self, q, emb, holes):
        """gamma W_o(ctx) at holes, zero elsewhere. q (B, T, d) hole-stream states, emb (B, T, d)
        token embeddings; ctx = softmax(q . e_j / sqrt(d)) e_j over j within +-window/2 of the
        hole, the hole excluded (ctx = 0 where no such j). Every position is computed, in chunks
        of c = window/2 (a query's keys lie in its chunk and the two beside it), and kept at the
        holes: fixed shapes, no host sync."""
        B, T, d = q.shape
        half = self.window // 2
        c = max(half, 1)
        nc = -(-T // c)
        kc = pad_chunks(emb, nc, c)                                           # (B, nc, c, d)
        # chunk i's keys: chunks i-1, i, i+1, (B, nc, 3c, d)
        keys = torch.cat([F.pad(kc, (0, 0, 0, 0, 1, 0))[:, :-1], kc, F.pad(kc, (0, 0, 0, 0, 0, 1))[:, 1:]], 2)
        qpos = torch.arange(nc * c, device=q.device).view(nc, c, 1)
        kpos = (torch.arange(nc, device=q.device) * c - c).view(nc, 1, 1) + torch.arange(3 * c, device=q.device)
        off = kpos - qpos                                                     # (nc, c, 3c)
        valid = (off != 0) & (off.abs() <= half) & (kpos >= 0) & (kpos < T)
        att = (pad_chunks(q, nc, c) @ keys.mT) / math.sqrt(d)                 # (B, nc, c, 3c)
        # a finite fill (exp underflows to exactly 0 all the same) and the mask again after the
        # softmax: a query without keys gets ctx = 0, never NaN, whose gradient would reach the weights
        att = att.masked_fill(~valid, torch.finfo(att.dtype).min).softmax(-1) * valid
        ctx = (att @ keys).view(B, nc * c, d)[:, :T]                          # (B, T, d)
        return torch.where(holes.unsqueeze(-1), self.gamma * self.addr_out(ctx), 0).to(q.dtype)


# ----------------------------------------------------------------------------- the model
def temporal_conv_depthwise(e, P):
    """The local position kernel: sum_{k=0}^{w-1} P[k] * e[p - k] (causal, per channel)."""
    w, d = P.shape
    out = F.conv1d(F.pad(e.transpose(1, 2), (w - 1, 0)), P.flip(0).t().unsqueeze(1).to(e.dtype), groups=d)
    return out.transpose(1, 2)


class FON(nn.Module):
    knobs, decode_knobs = ('holes', 'coupling'), ('coupling',)   # the runtime controls of forward and decode
    # the revision organ idles without holes (W_o, the hole kernels) or entirely (AR, and OD
    # without holes): under DDP these parameters get no gradient on some steps
    ddp_find_unused_parameters = True

    def __init__(self, config):
        super().__init__()
        cfg = self.config = config
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos_kernel = nn.Parameter(torch.zeros(cfg.pos_kernel, cfg.n_embd)) if cfg.pos_kernel else None
        self.h0_scale = cfg.emb_scale
        self.drop = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList([DraftLayer(cfg) for _ in range(cfg.n_layer)])
        self.revision = Revision(cfg)
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.lm_head.weight = self.wte.weight
        self.apply(self._init_weights)
        for layer in self.layers:
            layer.mix.init_special()

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if getattr(module, 'bias', None) is not None:
                nn.init.zeros_(module.bias)

    def num_params(self):
        """Every parameter once (the tied embedding/head once); the paper's Table 2 counts the
        tied matrix twice, sum(t.numel() for t in state_dict().values()) (docs/fon.md)."""
        return sum(p.numel() for p in self.parameters())

    def optim_groups(self, weight_decay):
        """train.py's split (matrices decay, the rest not; the hidden matrices go to Muon when
        optimizer='muon'), and the delay logits z_m apart at delay_lr_scale x the learning rate."""
        delays = [layer.mix.delay_logit for layer in self.layers]
        embed = {id(self.wte.weight), id(self.lm_head.weight)}
        muon = [m.weight for m in self.modules() if isinstance(m, nn.Linear) and id(m.weight) not in embed]
        seen = {id(p) for p in delays + muon}
        rest = [p for p in self.parameters() if id(p) not in seen]
        return [{'params': muon, 'weight_decay': weight_decay, 'optimizer': 'muon'},
                {'params': [p for p in rest if p.ndim >= 2], 'weight_decay': weight_decay},
                {'params': [p for p in rest if p.ndim < 2], 'weight_decay': 0.0},
                {'params': delays, 'weight_decay': 0.0, 'lr_scale': self.config.delay_lr_scale}]

    def flops_per_token(self, seq_len):
        """6 x matmul parameters per token (drafting trunk r times, the ripple matmuls where they
        run, the head) + the sequence mixing as implemented: the chunk solve about c/2 D
        multiply-adds per token (+ c D for the previous chunk when T > c), building its matrix
        n c, the ripple kernels n_w 2 s_max d per ripple layer. Hole streams are not counted.
        The paper's ledger (Table 2, 4: forward only) against this count: docs/fon.md."""
        cfg = self.config
        c = min(cfg.max_delay + 1, seq_len)
        D = cfg.expand * cfg.n_embd
        layer = sum(m.weight.numel() for m in self.layers[0].modules() if isinstance(m, nn.Linear))
        n_w = len(cfg.ripple_widths)
        ripple = cfg.n_ripple * n_w * cfg.n_embd ** 2
        conv = cfg.n_ripple * n_w * 2 * max(cfg.ripple_widths) * cfg.n_embd
        pc = cfg.coupling == 'PC'
        matmul = cfg.n_layer * cfg.num_recur * (layer + pc * ripple) + cfg.n_embd * cfg.vocab_size
        scan = D * c / 2 + (D * c if seq_len > c else 0) + cfg.n_taps * c
        return 6 * matmul + 6 * cfg.n_layer * cfg.num_recur * (scan + pc * conv)

    @torch.no_grad()
    def train_stats(self):
        """max over layers of sum_m lambda_m at x = 0 (> 1 would let S grow), the mean |gate|, the
        learned delays' range (delay_max < max_delay, the range's end) and how far they moved from
        their init, in octaves: delay_shift = mean |log2 d_m / d_m(init)|, delay_shift_max."""
        lam_sum = torch.stack([torch.exp(-F.softplus(l.mix.lam.bias)).sum() for l in self.layers])
        delays = torch.cat([l.mix.delays for l in self.layers])
        d0 = init_delays(self.config.n_taps, self.config.max_delay).to(delays.device).repeat(len(self.layers))
        shift = (delays / d0).log2().abs()
        return {'lambda_sum0': lam_sum.max().item(), 'gate': self.revision.gate.abs().mean().item(),
                'delay_min': delays.min().item(), 'delay_max': delays.max().item(),
                'delay_shift': shift.mean().item(), 'delay_shift_max': shift.max().item()}

    def _embed(self, idx):
        e = self.wte(idx)                                                     # (B, T, d)
        h = e
        if self.pos_kernel is not None:
            h = h + temporal_conv_depthwise(e, self.pos_kernel)
        return e, self.drop(self.h0_scale * h)

    def forward(self, idx, targets=None, holes=None, coupling=None):
        """idx (B, T); holes (B, T) bool or None: at a hole idx holds the MASK id and the logits
        predict the masked token; coupling None = the config's ('AR' | 'OD' | 'PC')."""
        coupling = coupling or self.config.coupling
        emb, h = self._embed(idx)
        fill = holes is not None and coupling != 'AR'   # a batch without holes: the caller passes None
        hh = h if fill else None                         # the hole stream
        for _ in range(self.config.num_recur):
            for layer in self.layers:
                h, S = layer(h)
                if fill:
                    hh, _ = layer(hh, S)
                    hh = hh + self.revision.gate * (self.revision.ripple(h, causal=False)
                                                    + self.revision.addr(hh, emb, holes))
                if coupling == 'PC':
                    h = h + self.revision.gate * self.revision.ripple(h, causal=True)
        if fill:
            h = torch.where(holes.unsqueeze(-1), hh, h)
        logits = self.lm_head(self.ln_f(h))                                   # (B, T, vocab)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    # ------------------------------------------------------------------ O(1)-state decoding
    @torch.no_grad()
    def decode_init(self, batch_size, device, coupling=None):
        """A fixed-size state: per drafting application (L x r) a ring of the last c = max_delay + 1
        delay states and, under PC, the last s - 1 ripple inputs; the last pos_kernel - 1 embeddings."""
        cfg = self.config
        coupling = coupling or cfg.coupling
        d, D, c = cfg.n_embd, cfg.expand * cfg.n_embd, cfg.max_delay + 1
        dt = self.wte.weight.dtype
        zeros = lambda *shape: torch.zeros(batch_size, *shape, device=device, dtype=dt)
        apps = cfg.n_layer * cfg.num_recur
        state = {'coupling': coupling, 'pos': 0,
                 'emb': zeros(max(cfg.pos_kernel - 1, 0), d),
                 'S': [torch.zeros(batch_size, c, D, device=device) for _ in range(apps)]}
        if coupling == 'PC':
            state['ripple'] = [[zeros(max(cfg.ripple_widths) - 1, d) for _ in range(cfg.n_ripple)]
                               for _ in range(apps)]
        return state

    @torch.no_grad()
    def decode_step(self, idx_t, state, coupling=None):
        """idx_t (B,) -> (logits (B, V), state): the logits forward gives at this position. The
        coupling is the one given to decode_init (this one is ignored). The state is updated in place."""
        e = self.wte(idx_t)
        h = e
        if self.pos_kernel is not None:
            win = torch.cat([state['emb'], e.unsqueeze(1)], 1)
            h = e + (self.pos_kernel.flip(0) * win).sum(1)
            state['emb'] = win[:, 1:]
        h = self.h0_scale * h
        pc = state['coupling'] == 'PC'
        i = 0
        for _ in range(self.config.num_recur):
            for layer in self.layers:
                h = layer.step(h, state['S'][i], state['pos'])
                if pc:
                    r = h
                    for k, rip in enumerate(self.revision.ripples):
                        r, state['ripple'][i][k] = rip.step(r, state['ripple'][i][k])
                    h = h + self.revision.gate * r
                i += 1
        state['pos'] += 1
        return self.lm_head(self.ln_f(h)), state

