"""
The baselines the four papers measure against, on the same contract as the new models.

GPT: GPT-2 (Radford et al. 2019) as nanoGPT writes it, learned positions, LayerNorm, GELU, biases,
tied head (124,475,904 parameters at vocab 50304). Each paper's Transformer baseline is config keys
on top of it; GPTConfig groups them under the paper that needs them, and with none set forward is
nanoGPT's. forward(idx, targets, causal=False) reads the same weights with full attention: a
bidirectional, non-generative encoder (FON's Table 8 control).

Mamba2: Mamba-2 (Dao & Gu, "Transformers are SSMs", arXiv 2405.21060), FON's recurrent baseline:
the SSD layer by its exact chunked algorithm in plain PyTorch (its equations head the Mamba2 section below).
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


@dataclass
class GPTConfig:
    # nanoGPT's seven: with only these set, the model is nanoGPT's GPT-2
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True
    # shapes, to meet each paper's parameter counts (all four)
    head_dim: int = None       # None: n_embd // n_head
    d_ff: int = None           # None: 4 * n_embd
    n_positions: int = None    # rows of the learned position table; None: block_size (FON's Table 2: 8192)
    tie_weights: bool = True   # the workspace's baseline unties the head
    # positions: rope in Parcae's baseline (nanochat), ALiBi (Press et al., arXiv 2108.12409) FON's control
    pos: str = 'learned'       # 'learned' (nanoGPT) | 'rope' | 'alibi' | 'none'
    rope_base: float = 10000.0
    # Parcae's Transformer (nanochat: Tables 18-20; swiglu its RDM setup, Table 17)
    norm: str = 'layer'        # 'layer' | 'rms'
    mlp: str = 'gelu'          # 'gelu' | 'relu2' | 'swiglu'
    qk_norm: bool = False      # parameter-free RMS norm of q and k
    value_embeds: bool = False  # layer i of n has one iff i % 2 == (n - 1) % 2: v += 2 sigmoid(W x[:32]) ve
    fused_qkv: bool = True     # one c_attn (nanoGPT) | False: c_q, c_k, c_v (Muon orthogonalises each)
    init: str = 'gpt2'         # 'gpt2' (nanoGPT) | 'scaled_zero' (Parcae's Table 18, as parcae.py)
    # TextNCA's SWin-TF and Universal Transformer; FON's looped Transformer
    windows: tuple = ()        # per layer: query i sees keys i-w+1..i (0 = global); an int: every layer
    n_loop: int = 1            # the stack applied n_loop times (Universal Transformer: n_layer=1, n_loop=6)

    def __post_init__(self):
        self.n_positions = self.n_positions or self.block_size
        self.head_dim = self.head_dim or self.n_embd // self.n_head
        self.d_ff = self.d_ff or 4 * self.n_embd
        if isinstance(self.windows, int):
            self.windows = (self.windows,) * self.n_layer
        self.windows = tuple(self.windows) or (0,) * self.n_layer
        checks = [
            (self.pos in ('learned', 'rope', 'alibi', 'none'), f"pos must be learned|rope|alibi|none, got {self.pos!r}"),
            (self.norm in ('layer', 'rms'), f"norm must be layer|rms, got {self.norm!r}"),
            (self.mlp in ('gelu', 'relu2', 'swiglu'), f"mlp must be gelu|relu2|swiglu, got {self.mlp!r}"),
            (self.init in ('gpt2', 'scaled_zero'), f"init must be gpt2|scaled_zero, got {self.init!r}"),
            (len(self.windows) == self.n_layer, f"windows needs one entry per layer ({self.n_layer}), got {len(self.windows)}"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ValueError(msg)


def make_norm(cfg, dim):
    return nn.LayerNorm(dim, bias=cfg.bias) if cfg.norm == 'layer' else nn.RMSNorm(dim)


def rope_tables(T, head_dim, base, device, offset=0):
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    t = torch.arange(offset, offset + T, device=device, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)
    return freqs.cos(), freqs.sin()  # (T, head_dim/2)


def apply_rope(x, cos, sin):  # x: (B, H, T, D), rotate the two halves
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).type_as(x)


def alibi_slopes(n_head):
    # Press et al.: geometric sequence 2^(-8/n), 2^(-16/n), ... (n a power of two; else interleave)
    def pow2(n):
        return [2 ** (-8 * (i + 1) / n) for i in range(n)]
    if math.log2(n_head).is_integer():
        return torch.tensor(pow2(n_head))
    p = 2 ** math.floor(math.log2(n_head))
    return torch.tensor(pow2(p) + pow2(2 * p)[0::2][: n_head - p])


# ----------------------------------------------------------------------------- sliding-window attention
# The same chunked form as textnca.py (each model file stays self-contained): query i sees keys
# max(0, i-w+1)..i; queries go in chunks of c = min(w, T), and a chunk sees only itself and the
# chunk before, so time and memory are O(T w), never T x T.

def local_attention_reference(q, k, v, w, slopes=None):
    """What local_attention computes, one query at a time: softmax over keys j = max(0, i-w+1)..i
    of q_i . k_j / sqrt(D) - slope_h (i - j) (ALiBi when slopes is given)."""
    D = q.shape[-1]
    y = torch.zeros_like(v)
    for i in range(q.shape[2]):
        j0 = max(0, i - w + 1)
        s = (q[:, :, i:i + 1] @ k[:, :, j0:i + 1].transpose(-1, -2)) / math.sqrt(D)   # (B, H, 1, keys)
        if slopes is not None:
            s = s - slopes[:, None, None] * (i - torch.arange(j0, i + 1, device=q.device))
        y[:, :, i] = (s.softmax(-1) @ v[:, :, j0:i + 1])[:, :, 0]
    return y


def band_chunks(t, c):
    """(B, H, n*c, ...) -> (B, H, n, 2c, ...): each chunk preceded by the previous one (zeros first)."""
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


def local_attention(q, k, v, w, slopes=None, dropout_p=0.0, flex=None):
    """q, k, v: (B, H, T, D). Query i attends to keys max(0, i-w+1)..i, in chunks of c = min(w, T)
    (exactly local_attention_reference). slopes: (H,) ALiBi slopes, or None. flex: through
    FlexAttention (None: on CUDA under torch.compile; it has no dropout)."""
    B, H, T, D = q.shape
    if dropout_p == 0.0 and (use_flex(q) if flex is None else flex):
        score_mod = None
        if slopes is not None:
            sl = slopes.to(q.device)

            def score_mod(score, b, h, qi, ki):   # ALiBi: - slope_h (i - j)
                return score - sl[h] * (qi - ki)
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=sliding_block_mask(T, w, q.device))
    c = min(w, T)
    n = -(-T // c)
    pad = n * c - T
    q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    qc, kc, vc = q.view(B, H, n, c, D), band_chunks(k, c), band_chunks(v, c)
    mask = band_mask(n, c, w, q.device)                              # (n, c, 2c)
    if slopes is not None:
        bias = -slopes.to(q.device)[:, None, None] * band_distance(c, q.device)   # (H, c, 2c)
        mask = bias[:, None].masked_fill(~mask, float('-inf')).to(q.dtype)     # (H, n, c, 2c)
    y = F.scaled_dot_product_attention(qc, kc, vc, attn_mask=mask, dropout_p=dropout_p)
    return y.reshape(B, H, n * c, D)[:, :, :T]


class CausalSelfAttention(nn.Module):

    def __init__(self, cfg, window, has_ve):
        super().__init__()
        self.cfg, self.window, self.n_head, self.hd = cfg, window, cfg.n_head, cfg.head_dim
        inner = cfg.n_head * cfg.head_dim
        if cfg.fused_qkv:
            self.c_attn = nn.Linear(cfg.n_embd, 3 * inner, bias=cfg.bias)
        else:
            self.c_q = nn.Linear(cfg.n_embd, inner, bias=cfg.bias)
            self.c_k = nn.Linear(cfg.n_embd, inner, bias=cfg.bias)
            self.c_v = nn.Linear(cfg.n_embd, inner, bias=cfg.bias)
        self.c_proj = nn.Linear(inner, cfg.n_embd, bias=cfg.bias)
        self.ve_gate = nn.Linear(32, cfg.n_head, bias=False) if has_ve else None
        self.resid_dropout = nn.Dropout(cfg.dropout)
        if cfg.pos == 'alibi':
            self.register_buffer('slopes', alibi_slopes(cfg.n_head), persistent=False)

    def forward(self, x, ve=None, pos0=0, cache=None, causal=True):
        """x: (B, T, C) at absolute positions pos0..pos0+T-1. cache: None, or a dict holding
        this layer's past k, v (incremental decoding); it is extended in place. causal=False:
        every query sees every key (a bidirectional encoder reading, FON's Table 8 control)."""
        B, T, C = x.shape
        if self.cfg.fused_qkv:
            q, k, v = self.c_attn(x).split(self.n_head * self.hd, dim=2)    # (B, T, H hd) each
        else:
            q, k, v = self.c_q(x), self.c_k(x), self.c_v(x)
        q = q.view(B, T, self.n_head, self.hd).transpose(1, 2)               # (B, H, T, hd)
        k = k.view(B, T, self.n_head, self.hd).transpose(1, 2)               # (B, H, T, hd)
        v = v.view(B, T, self.n_head, self.hd)                               # (B, T, H, hd)
        if ve is not None:
            gate = 2 * torch.sigmoid(self.ve_gate(x[..., :32]))          # (B, T, H), in (0, 2)
            v = v + gate.unsqueeze(-1) * ve.view(B, T, self.n_head, self.hd)
        v = v.transpose(1, 2)                                                # (B, H, T, hd)
        if self.cfg.pos == 'rope':
            cos, sin = rope_tables(T, self.hd, self.cfg.rope_base, x.device, offset=pos0)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.cfg.qk_norm:
            q, k = F.rms_norm(q, (self.hd,)), F.rms_norm(k, (self.hd,))
        p = self.cfg.dropout if self.training else 0.0
        if cache is None and causal and self.cfg.pos != 'alibi' and not 0 < self.window < T:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)   # nanoGPT's
        else:   # decoding, full attention (FON's Table 8), a window (TextNCA), ALiBi (FON)
            y = self.attend_masked(q, k, v, pos0, cache, causal, p)
        y = y.transpose(1, 2).contiguous().view(B, T, self.n_head * self.hd)   # (B, T, H hd)
        return self.resid_dropout(self.c_proj(y))                            # (B, T, C)

    def attend_masked(self, q, k, v, pos0, cache, causal, p):
        """q, k, v (B, H, T, hd) attended other than nanoGPT's way: from a KV cache, full, in a window, ALiBi."""
        T, slopes = q.shape[2], self.slopes if self.cfg.pos == 'alibi' else None
        if cache is not None:
            if 'k' in cache:
                k, v = torch.cat([cache['k'], k], dim=2), torch.cat([cache['v'], v], dim=2)  # (B, H, S, hd)
            if self.window > 0:  # a windowed layer keeps only the w most recent keys
                k, v = k[:, :, -self.window:], v[:, :, -self.window:]
            cache['k'], cache['v'] = k, v
            p = 0.0   # decoding: no dropout
            if T == 1 and slopes is None:  # one query, every kept key visible: no mask, so flash can run
                return F.scaled_dot_product_attention(q, k, v)
        elif causal and 0 < self.window < T:
            return local_attention(q, k, v, self.window, slopes, p)
        elif not causal and self.window:
            raise ValueError("causal=False needs global attention layers (windows are causal)")
        elif not causal and slopes is None:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p)
        S = k.shape[2]
        qpos, kpos = pos0 + torch.arange(T, device=q.device)[:, None], pos0 + T - S + torch.arange(S, device=q.device)
        dist = qpos - kpos[None, :]                                          # (T, S)
        if not causal:   # ALiBi by distance either way
            bias = (-slopes[:, None, None] * dist.abs()).to(q.dtype)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p)
        allowed = (dist >= 0) & ((dist < self.window) if self.window > 0 else True)
        bias = torch.zeros(dist.shape, device=q.device) if slopes is None else -slopes[:, None, None] * dist
        bias = bias.masked_fill(~allowed, float('-inf')).to(q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p)


class MLP(nn.Module):

    def __init__(self, cfg):
        super().__init__()
        self.kind = cfg.mlp
        self.c_fc = nn.Linear(cfg.n_embd, cfg.d_ff, bias=cfg.bias)
        if cfg.mlp == 'swiglu':
            self.c_gate = nn.Linear(cfg.n_embd, cfg.d_ff, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.d_ff, cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        h = self.c_fc(x)                                                     # (B, T, d_ff)
        if self.kind == 'gelu':
            h = F.gelu(h)
        elif self.kind == 'relu2':
            h = F.relu(h).square()
        else:
            h = F.silu(self.c_gate(x)) * h
        return self.dropout(self.c_proj(h))                                  # (B, T, C)


class Block(nn.Module):

    def __init__(self, cfg, window, has_ve):
        super().__init__()
        self.ln_1 = make_norm(cfg, cfg.n_embd)
        self.attn = CausalSelfAttention(cfg, window, has_ve)
        self.ln_2 = make_norm(cfg, cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x, ve=None, pos0=0, cache=None, causal=True):
        x = x + self.attn(self.ln_1(x), ve, pos0, cache, causal)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    knobs = ('causal',)   # the forward's runtime controls (train.py, sample.py, tools.eval)

    def __init__(self, config):
        super().__init__()
        cfg = self.config = config
        n = cfg.n_layer
        self.has_ve = [cfg.value_embeds and i % 2 == (n - 1) % 2 for i in range(n)]
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
            wpe=nn.Embedding(cfg.n_positions, cfg.n_embd) if cfg.pos == 'learned' else None,
            drop=nn.Dropout(cfg.dropout),
            h=nn.ModuleList([Block(cfg, cfg.windows[i], self.has_ve[i]) for i in range(n)]),
            ln_f=make_norm(cfg, cfg.n_embd),
        ))
        self.value_embeds = nn.ModuleDict({str(i): nn.Embedding(cfg.vocab_size, cfg.n_head * cfg.head_dim)
                                           for i in range(n) if self.has_ve[i]})
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.lm_head.weight = self.transformer.wte.weight
        if cfg.init == 'scaled_zero':
            self._init_scaled_zero()
        else:
            self.apply(self._init_weights)
            for name, p in self.named_parameters():  # GPT-2: residual projections scaled by depth
                if name.endswith('c_proj.weight'):
                    nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n * cfg.n_loop))

    @torch.no_grad()
    def _init_scaled_zero(self):
        """Parcae Table 18 ('scaled-zero' [74, 42]), as parcae.Parcae.reset_parameters."""
        std = math.sqrt(2 / (5 * self.config.n_embd))
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.trunc_normal_(m.weight, std=std, a=-3 * std, b=3 * std)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for block in self.transformer.h:
            nn.init.zeros_(block.attn.c_proj.weight)
            nn.init.zeros_(block.mlp.c_proj.weight)
            if block.attn.ve_gate is not None:
                nn.init.zeros_(block.attn.ve_gate.weight)

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def optim_groups(self, weight_decay):
        """nanoGPT's AdamW split (decay on matrices and embeddings, none on 1-D parameters); with
        optimizer='muon', Parcae's Table 20 (nanochat): the blocks' attention and MLP matrices go
        to Muon, the embeddings, head and value-embedding gates stay with AdamW."""
        muon = [p for name, p in self.transformer.h.named_parameters() if p.ndim == 2 and 've_gate' not in name]
        seen = {id(p) for p in muon}
        rest = [p for p in self.parameters() if id(p) not in seen]
        return [{'params': muon, 'weight_decay': weight_decay, 'optimizer': 'muon'},
                {'params': [p for p in rest if p.ndim >= 2], 'weight_decay': weight_decay, 'optimizer': 'adamw'},
                {'params': [p for p in rest if p.ndim < 2], 'weight_decay': 0.0, 'optimizer': 'adamw'}]

    def flops_per_token(self, seq_len):
        cfg = self.config
        per_block = sum(m.weight.numel() for m in self.transformer.h.modules() if isinstance(m, nn.Linear))
        matmul = per_block * cfg.n_loop + cfg.n_embd * cfg.vocab_size
        attn = sum(12 * cfg.n_head * cfg.head_dim * (min(w, seq_len) if w else seq_len) for w in cfg.windows)
        return 6 * matmul + attn * cfg.n_loop

    def _embed(self, idx, pos0):
        T = idx.shape[1]
        x = self.transformer.wte(idx)                                        # (B, T, C)
        if self.config.pos == 'learned':
            if pos0 + T > self.config.n_positions:
                raise ValueError(f"sequence of length {pos0 + T} is longer than the {self.config.n_positions} learned positions")
            x = x + self.transformer.wpe(torch.arange(pos0, pos0 + T, device=idx.device))   # + (T, C)
        return self.transformer.drop(x)

    def _blocks(self, x, idx, pos0=0, caches=None, causal=True):
        ves = {i: emb(idx) for i, emb in ((int(k), e) for k, e in self.value_embeds.items())}
        for r in range(self.config.n_loop):
            for i, block in enumerate(self.transformer.h):
                cache = None if caches is None else caches[r * self.config.n_layer + i]
                x = block(x, ves.get(i), pos0, cache, causal)
        return x

    def forward(self, idx, targets=None, causal=True):
        """causal=False reads the sequence with full attention: a non-generative bidirectional
        encoder of the same weights (FON Table 8's 'Transformer (bidirectional)' control)."""
        x = self._embed(idx, 0)                                              # (B, T, C)
        x = self._blocks(x, idx, causal=causal)                              # (B, T, C)
        logits = self.lm_head(self.transformer.ln_f(x))                      # (B, T, vocab)
        loss = None
        if targets is not None:
            flat, t = logits.float().view(-1, logits.size(-1)), targets.reshape(-1)
            if causal:
                loss = F.cross_entropy(flat, t, ignore_index=-1)
            else:   # the mean over the targets given (the holes): a batch without holes scores 0, a step adding nothing
                loss = F.cross_entropy(flat, t, ignore_index=-1, reduction='sum') / (t != -1).sum().clamp(min=1)
        return logits, loss

    # incremental decoding with a KV cache (windowed layers keep only their last w keys)
    def decode_init(self, batch_size, device):
        return {'pos': 0, 'caches': [{} for _ in range(self.config.n_layer * self.config.n_loop)]}

    def decode_step(self, idx_t, state):
        idx = idx_t.view(-1, 1)
        x = self._blocks(self._embed(idx, state['pos']), idx, state['pos'], state['caches'])
        state['pos'] += 1
        return self.lm_head(self.transformer.ln_f(x))[:, -1], state


# ----------------------------------------------------------------------------- Mamba2
# Mamba-2 (Dao & Gu 2024, "Transformers are SSMs"), FON's recurrent baseline, in plain PyTorch:
# the SSD layer computed by its exact chunked algorithm (quadratic inside a chunk of chunk_size
# positions, a linear recurrence over chunk states), no custom kernels. Per layer (pre-norm
# residual): in_proj -> [z, xBC, dt]; xBC -> causal depthwise conv -> SiLU -> x, B, C;
#   h_t = exp(dt_t A) h_{t-1} + dt_t B_t x_t^T,   y_t = C_t h_t + D x_t   (per head: h is N x P)
# y -> RMSNorm(y * SiLU(z)) -> out_proj. n_loop applies the stack of n_layer blocks n_loop times
# (M2-Looped). The default is the FON paper's d 256 / L 4 baseline: with expand 4 and d_state 64
# and an untied head it counts 29,077,440 (paper: 28.89M, +0.65%).

@dataclass
class Mamba2Config:
    block_size: int = 1024     # nothing depends on it (no positions)
    vocab_size: int = 50304
    n_layer: int = 4
    n_embd: int = 256
    d_state: int = 64          # N
    d_conv: int = 4
    expand: int = 4            # d_inner = expand * n_embd
    headdim: int = 64          # P; heads H = d_inner / P
    ngroups: int = 1           # B, C shared by the heads of a group
    chunk_size: int = 64       # SSD chunk length Q
    n_loop: int = 1
    dropout: float = 0.0
    bias: bool = False
    tie_weights: bool = False

    def __post_init__(self):
        d_inner = self.expand * self.n_embd
        if d_inner % self.headdim:
            raise ValueError(f"expand * n_embd ({d_inner}) must be a multiple of headdim ({self.headdim})")
        if (d_inner // self.headdim) % self.ngroups:
            raise ValueError(f"the heads ({d_inner // self.headdim}) must split evenly into ngroups ({self.ngroups})")


def ssd_reference(X, A, B, C):
    """The SSD recurrence as written, one position at a time (same arguments as ssd_chunked):
    h_t = exp(A_t) h_{t-1} + X_t B_t^T (h: P x N per head, h_0 = 0), y_t = h_t C_t."""
    b, T, H, P = X.shape
    B, C = (t.repeat_interleave(H // t.shape[2], dim=2) for t in (B, C))
    h, ys = X.new_zeros(b, H, P, B.shape[-1]), []
    for t in range(T):
        h = A[:, t].exp()[..., None, None] * h + X[:, t, :, :, None] * B[:, t, :, None, :]
        ys.append((h @ C[:, t, :, :, None]).squeeze(-1))
    return torch.stack(ys, 1)


class ChunkDiag(torch.autograd.Function):
    """The SSD's quadratic form inside a chunk, per head: y = (L * CB) X with L[l, s] =
    exp(a[l] - a[s]) (the exponent clamped to [lo, 0]), CB = C B^T with its future (s > l)
    zeroed, shared by a group's heads. a (..., Hg, Q), CB (..., 1, Q, Q), X (..., Hg, Q, P).
    The future's exponents (> 0) clamp to 0 and meet CB's zeros. Autograd through exp, clamp and
    the difference takes about ten passes over the (Q, Q) per head tensors; with E = dM * M,
    d a[l] = sum_s E[l, s] - sum_s E[s, l] takes two."""

    @staticmethod
    def forward(ctx, a, CB, X, lo):
        a = a.contiguous()   # else L takes a's permuted strides, and M and both matmuls over it copy
        L = (a.unsqueeze(-1) - a.unsqueeze(-2)).clamp_(lo, 0).exp_()
        M, X = L * CB, X.contiguous()
        ctx.save_for_backward(L, M, X)
        return M @ X

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy):
        L, M, X = ctx.saved_tensors
        dy = dy.contiguous()   # arrives permuted: once here, not once inside each matmul
        dM, dX = dy @ X.mT, M.mT @ dy
        dCB = (dM * L).sum(-3, keepdim=True)
        E = dM.mul_(M)
        return E.sum(-1) - E.sum(-2), dCB, dX, None


def ssd_chunked(X, A, B, C, chunk):
    """Exact SSD: X (b, T, H, P) (already times dt), A (b, T, H) = dt * A (log decay, <= 0),
    B, C (b, T, G, N), group g shared by heads g H/G .. (g+1) H/G - 1. Returns y (b, T, H, P) with
    h_t = exp(A_t) h_{t-1} + X_t B_t^T, y_t = h_t C_t."""
    # matmul is on autocast's lower-precision list: with autocast on, the scan would run in bf16
    # (relative error ~4e-3 against ~1e-7 in fp32); it runs in fp32 (or the inputs' wider dtype)
    with torch.autocast(X.device.type, enabled=False):
        X, A, B, C = (t.to(torch.promote_types(t.dtype, torch.float32)) for t in (X, A, B, C))
        return _ssd_chunked(X, A, B, C, chunk)


def _ssd_chunked(X, A, B, C, chunk):
    # every product below is one matmul over a chunk: B and C once per group (not per head), the
    # chunk states and their read-out as (Q x N) by (N x heads P); the chunk recurrence is a loop
    b, T, H, P = X.shape
    G, N = B.shape[-2:]
    Hg = H // G
    Q = min(chunk, T)
    nc = -(-T // Q)
    pad = nc * Q - T
    if pad:  # zero input and zero decay at the end change nothing before it
        X, A, B, C = (F.pad(t, (0, 0) * (t.dim() - 2) + (0, pad)) for t in (X, A, B, C))
    X = X.view(b, nc, Q, G, Hg, P)
    B, C = (t.view(b, nc, Q, G, N).transpose(2, 3) for t in (B, C))     # (b, nc, G, Q, N)
    A_cum = A.view(b, nc, Q, G, Hg).cumsum(2)                           # within each chunk
    # every exponent here is <= 0 (a cumsum of A <= 0 never rises, in floating point too); one
    # below log(tiny) is raised to it: CPU exp takes a slow path 30-80x as long for a result below
    # the smallest normal number (and for -inf), and the value it would give differs from tiny by
    # less than tiny
    lo = math.log(torch.finfo(X.dtype).tiny)
    exp = lambda t: t.clamp(lo, 0).exp()
    # 1. inside each chunk: y[l] = sum_{s <= l} exp(A_cum[l] - A_cum[s]) (C_l . B_s) X_s
    y = ChunkDiag.apply(A_cum.permute(0, 1, 3, 4, 2), (C @ B.mT).tril().unsqueeze(3), X.permute(0, 1, 3, 4, 2, 5), lo)
    y = y.permute(0, 1, 4, 2, 3, 5)                                      # (b, nc, Q, G, Hg, P)
    # 2. each chunk's final state from its own inputs: (N, Hg P) per group
    Xd = X * exp(A_cum[:, :, -1:] - A_cum).unsqueeze(-1)
    states = B.mT @ Xd.flatten(-2).transpose(2, 3)                      # (b, nc, G, N, Hg P)
    # 3. the recurrence over chunk boundaries (zero initial state): the state entering chunk i
    decay = exp(A_cum[:, :, -1]).view(b, nc, G, 1, Hg, 1)
    states = states.unbind(1)
    S = [torch.zeros_like(states[0])]
    for i in range(nc - 1):
        S.append((decay[:, i] * S[-1].view(b, G, N, Hg, P)).view(b, G, N, Hg * P) + states[i])
    S = torch.stack(S, 1)
    # 4. the state entering each chunk, read out at every position of it
    y_off = (C @ S).view(b, nc, G, Q, Hg, P).transpose(2, 3) * exp(A_cum).unsqueeze(-1)
    return (y_off + y).reshape(b, nc * Q, H, P)[:, :T]   # y_off's layout (contiguous) is the sum's: no copy


class CausalConv(torch.autograd.Function):
    """Mamba2's depthwise causal conv along time on x (b, T, channels), w (channels, K), bias:
    out[t] = bias + sum_j w[:, K-1-j] x[t-j], the sum conv1d(padding=K-1)[..., :T] computes, as K
    shifted multiply-adds in place; its backward is the same shifts reversed. On a CPU conv1d's
    depthwise backward, the transposes around it and SiLU on the transposed result took a sixth
    of the model's training step."""

    @staticmethod
    def forward(ctx, x, w, bias):
        ctx.save_for_backward(x, w)
        K, T = w.shape[1], x.shape[1]
        out = torch.addcmul(bias, x, w[:, K - 1])
        for j in range(1, min(K, T)):
            out[:, j:].addcmul_(x[:, :T - j], w[:, K - 1 - j])
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        K, T = w.shape[1], x.shape[1]
        gx, gw = g * w[:, K - 1], torch.zeros_like(w)
        gw[:, K - 1] = (g * x).sum((0, 1))
        for j in range(1, min(K, T)):
            gx[:, :T - j].addcmul_(g[:, j:], w[:, K - 1 - j])
            gw[:, K - 1 - j] = (g[:, j:] * x[:, :T - j]).sum((0, 1))
        return gx, gw, g.sum((0, 1))


class Mamba2Mixer(nn.Module):

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, self.d_inner, N, G = cfg.n_embd, cfg.expand * cfg.n_embd, cfg.d_state, cfg.ngroups
        self.nheads = self.d_inner // cfg.headdim
        self.conv_dim = self.d_inner + 2 * G * N
        self.in_proj = nn.Linear(d, 2 * self.d_inner + 2 * G * N + self.nheads, bias=cfg.bias)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, cfg.d_conv, groups=self.conv_dim, padding=cfg.d_conv - 1)
        self.dt_bias = nn.Parameter(torch.empty(self.nheads))
        self.A_log = nn.Parameter(torch.empty(self.nheads))
        self.D = nn.Parameter(torch.ones(self.nheads))
        self.norm = nn.RMSNorm(self.d_inner)
        self.out_proj = nn.Linear(self.d_inner, d, bias=cfg.bias)

    def reset_ssm(self):
        """Mamba2's init: A ~ U(1, 16), dt ~ logU(1e-3, 1e-1) through the inverse softplus."""
        with torch.no_grad():
            self.A_log.copy_(torch.empty_like(self.A_log).uniform_(1, 16).log())
            dt = torch.exp(torch.empty_like(self.dt_bias).uniform_(math.log(1e-3), math.log(1e-1)))
            self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))

    def split(self, zxbcdt):
        return zxbcdt.split([self.d_inner, self.conv_dim, self.nheads], dim=-1)

    def ssm_inputs(self, xBC, dt):
        """-> x (..., H, P), B, C (..., G, N), dt, A."""
        G, N, P = self.cfg.ngroups, self.cfg.d_state, self.cfg.headdim
        x, B, C = xBC.split([self.d_inner, G * N, G * N], dim=-1)
        x = x.unflatten(-1, (self.nheads, P))
        return x, B.unflatten(-1, (G, N)), C.unflatten(-1, (G, N)), F.softplus(dt + self.dt_bias), -torch.exp(self.A_log.float())

    def conv(self, xBC):
        w, b = self.conv1d.weight.squeeze(1), self.conv1d.bias
        return CausalConv.apply(xBC, w.to(xBC.dtype), b.to(xBC.dtype))

    def forward(self, u):   # u: (b, T, d)
        z, xBC, dt = self.split(self.in_proj(u))                 # (b, T, d_inner), (b, T, conv_dim), (b, T, H)
        x, B, C, dt, A = self.ssm_inputs(F.silu(self.conv(xBC)), dt)   # x (b, T, H, P), B, C (b, T, G, N)
        y = ssd_chunked((x * dt.unsqueeze(-1)).float(), (dt * A).float(), B.float(), C.float(), self.cfg.chunk_size)
        y = (y + x * self.D[:, None]).to(u.dtype).flatten(-2)                # (b, T, d_inner)
        return self.out_proj(self.norm(y * F.silu(z)))                       # (b, T, d)

    def step(self, u, conv_state, ssm_state):
        """One position: u (b, d); conv_state (b, conv_dim, d_conv - 1); ssm_state (b, H, P, N)."""
        z, xBC, dt = self.split(self.in_proj(u))
        win = torch.cat([conv_state, xBC.unsqueeze(-1)], -1)                 # (b, conv_dim, d_conv)
        xBC = F.silu((win * self.conv1d.weight.squeeze(1)).sum(-1) + self.conv1d.bias)
        x, B, C, dt, A = self.ssm_inputs(xBC, dt)
        B, C = (t.repeat_interleave(self.nheads // self.cfg.ngroups, dim=-2) for t in (B, C))
        dA = torch.exp(dt * A)                                               # (b, H)
        ssm_state = ssm_state * dA[..., None, None] + (x * dt.unsqueeze(-1)).float().unsqueeze(-1) * B.float().unsqueeze(-2)
        with torch.autocast(u.device.type, enabled=False):                   # fp32 read-out, as ssd_chunked
            y = (ssm_state @ C.float().unsqueeze(-1)).squeeze(-1)            # (b, H, P)
        y = (y + x * self.D[:, None]).to(u.dtype).flatten(-2)
        return self.out_proj(self.norm(y * F.silu(z))), win[..., 1:], ssm_state


class Mamba2Block(nn.Module):

    def __init__(self, cfg):
        super().__init__()
        self.norm = nn.RMSNorm(cfg.n_embd)
        self.mixer = Mamba2Mixer(cfg)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return x + self.drop(self.mixer(self.norm(x)))

    def step(self, x, conv_state, ssm_state):
        y, conv_state, ssm_state = self.mixer.step(self.norm(x), conv_state, ssm_state)
        return x + y, conv_state, ssm_state


class Mamba2(nn.Module):
    knobs = ()

    def __init__(self, config):
        super().__init__()
        cfg = self.config = config
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList([Mamba2Block(cfg) for _ in range(cfg.n_layer)])
        self.norm_f = nn.RMSNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.lm_head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if name.endswith('in_proj.weight') or name == 'wte.weight' or name == 'lm_head.weight':
                nn.init.normal_(p, mean=0.0, std=0.02)
            elif name.endswith('out_proj.weight'):    # one residual branch per block
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(cfg.n_layer * cfg.n_loop))
            elif name.endswith('proj.bias'):
                nn.init.zeros_(p)
        for layer in self.layers:
            layer.mixer.reset_ssm()

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self, seq_len):
        """6 x (in/out projections per application + head) + the SSD terms per token and layer:
        within a chunk Q (N G + d_inner) multiply-adds, chunk states and their read-out 2 N d_inner,
        the conv d_conv per channel."""
        cfg, m = self.config, self.layers[0].mixer
        Q = min(cfg.chunk_size, seq_len)
        proj = m.in_proj.weight.numel() + m.out_proj.weight.numel()
        ssd = Q * (cfg.d_state * cfg.ngroups + m.d_inner) + 2 * cfg.d_state * m.d_inner + cfg.d_conv * m.conv_dim
        apps = cfg.n_layer * cfg.n_loop
        return 6 * (proj * apps + cfg.n_embd * cfg.vocab_size) + 6 * ssd * apps

    def forward(self, idx, targets=None):
        x = self.drop(self.wte(idx))                                         # (B, T, d)
        for layer in [*self.layers] * self.config.n_loop:
            x = layer(x)
        logits = self.lm_head(self.norm_f(x))                                # (B, T, vocab)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    # recurrent decoding: per block application a conv window and an (H, P, N) state, O(1) in length
    def decode_init(self, batch_size, device):
        cfg, m = self.config, self.layers[0].mixer
        dt, apps = self.wte.weight.dtype, cfg.n_layer * cfg.n_loop
        return {'pos': 0,
                'conv': [torch.zeros(batch_size, m.conv_dim, cfg.d_conv - 1, device=device, dtype=dt) for _ in range(apps)],
                'ssm': [torch.zeros(batch_size, m.nheads, cfg.headdim, cfg.d_state, device=device) for _ in range(apps)]}

    def decode_step(self, idx_t, state):
        x = self.wte(idx_t)                                                  # (B, d)
        for i, layer in enumerate([*self.layers] * self.config.n_loop):     # application i: its own state
            x, state['conv'][i], state['ssm'][i] = layer.step(x, state['conv'][i], state['ssm'][i])
        state['pos'] += 1
        return self.lm_head(self.norm_f(x)), state                           # (B, vocab)
