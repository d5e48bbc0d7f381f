"""
The baselines the four papers measure against, on the same contract as the new models.

GPT is nanoGPT's GPT-2 by default (learned positions, LayerNorm, GELU, biases, tied head:
124,475,904 parameters at vocab 50304). Every option a paper's baseline needs is a config key:
  pos            'learned' | 'rope' | 'alibi' | 'none'
  norm           'layer' | 'rms' (RMSNorm with weight)
  mlp            'gelu' | 'relu2' | 'swiglu'
  qk_norm        parameter-free RMS norm of q and k (nanochat)
  value_embeds   nanochat value embeddings on alternating layers (layer i of n has one iff
                 i % 2 == (n - 1) % 2), mixed into v through gate = 2 sigmoid(Linear(x[:32]))
  windows        per-layer local causal attention window w (keys i-w+1..i), 0 = global;
                 computed in chunks so time and memory grow with T*w, not T^2
  n_loop         the stack of n_layer distinct blocks is applied n_loop times
                 (Universal Transformer: n_layer=1, n_loop=6; looped r=2: n_loop=2)
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_kv_head: int = None      # None: n_head (no grouped-query attention)
    n_embd: int = 768
    head_dim: int = None       # None: n_embd // n_head
    d_ff: int = None           # None: 4 * n_embd
    dropout: float = 0.0
    bias: bool = True
    pos: str = 'learned'
    rope_base: float = 10000.0
    norm: str = 'layer'
    mlp: str = 'gelu'
    qk_norm: bool = False
    value_embeds: bool = False
    windows: tuple = ()        # one window per layer (0 = global); an int applies to every layer
    n_loop: int = 1
    tie_weights: bool = True
    logit_softcap: float = 0.0

    def __post_init__(self):
        self.n_kv_head = self.n_kv_head or self.n_head
        self.head_dim = self.head_dim or self.n_embd // self.n_head
        self.d_ff = self.d_ff or 4 * self.n_embd
        if isinstance(self.windows, int):
            self.windows = (self.windows,) * self.n_layer
        self.windows = tuple(self.windows) or (0,) * self.n_layer
        checks = [
            (self.pos in ('learned', 'rope', 'alibi', 'none'), f"pos must be learned|rope|alibi|none, got {self.pos!r}"),
            (self.norm in ('layer', 'rms'), f"norm must be layer|rms, got {self.norm!r}"),
            (self.mlp in ('gelu', 'relu2', 'swiglu'), f"mlp must be gelu|relu2|swiglu, got {self.mlp!r}"),
            (len(self.windows) == self.n_layer, f"windows needs one entry per layer ({self.n_layer}), got {len(self.windows)}"),
            (self.n_head % self.n_kv_head == 0, f"n_head ({self.n_head}) must be a multiple of n_kv_head ({self.n_kv_head})"),
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


def local_attention(q, k, v, w, slopes=None, dropout_p=0.0):
    """Causal attention where query i sees keys i-w+1..i, in chunks of c >= w: each chunk of
    queries attends to its own chunk and the previous one, so cost is O(T * c), never T x T."""
    B, H, T, D = q.shape
    c = max(w, 16)
    n = -(-T // c)
    pad = n * c - T
    q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    qc = q.view(B, H, n, c, D)

    def two_chunks(t):  # (B, H, n, 2c, D): previous chunk (zeros before the start) + own chunk
        t = t.view(B, H, n, c, D)
        return torch.cat([F.pad(t, (0, 0, 0, 0, 1, 0))[:, :, :-1], t], dim=3)

    kc, vc = two_chunks(k), two_chunks(v)
    i = torch.arange(c, device=q.device)[:, None] + c
    j = torch.arange(2 * c, device=q.device)[None, :]
    dist = i - j                                                    # query pos - key pos
    allowed = (dist >= 0) & (dist < w)
    allowed = allowed.expand(n, c, 2 * c).clone()
    allowed[0, :, :c] = False                                       # before the sequence start
    if slopes is None:
        mask = allowed
    else:
        bias = -slopes.to(q.device)[:, None, None] * dist            # (H, c, 2c)
        mask = bias[:, None].masked_fill(~allowed, float('-inf')).to(q.dtype)  # (H, n, c, 2c)
    y = F.scaled_dot_product_attention(qc, kc, vc, attn_mask=mask, dropout_p=dropout_p)
    return y.reshape(B, H, n * c, D)[:, :, :T]


class CausalSelfAttention(nn.Module):

    def __init__(self, cfg, window, has_ve):
        super().__init__()
        self.cfg, self.window = cfg, window
        self.n_head, self.n_kv, self.hd = cfg.n_head, cfg.n_kv_head, cfg.head_dim
        self.c_attn = nn.Linear(cfg.n_embd, (cfg.n_head + 2 * cfg.n_kv_head) * cfg.head_dim, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_head * cfg.head_dim, cfg.n_embd, bias=cfg.bias)
        self.ve_gate = nn.Linear(32, cfg.n_kv_head, bias=False) if has_ve else None
        self.resid_dropout = nn.Dropout(cfg.dropout)
        if cfg.pos == 'alibi':
            self.register_buffer('slopes', alibi_slopes(cfg.n_head), persistent=False)

    def forward(self, x, ve=None, pos0=0, cache=None):
        """x: (B, T, C) at absolute positions pos0..pos0+T-1. cache: None, or a dict holding
        this layer's past k, v (incremental decoding); it is extended in place."""
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split([self.n_head * self.hd, self.n_kv * self.hd, self.n_kv * self.hd], dim=2)
        q = q.view(B, T, self.n_head, self.hd).transpose(1, 2)
        k = k.view(B, T, self.n_kv, self.hd).transpose(1, 2)
        v = v.view(B, T, self.n_kv, self.hd)
        if ve is not None:
            gate = 2 * torch.sigmoid(self.ve_gate(x[..., :32]))          # (B, T, n_kv)
            v = v + gate.unsqueeze(-1) * ve.view(B, T, self.n_kv, self.hd)
        v = v.transpose(1, 2)
        if self.cfg.pos == 'rope':
            cos, sin = rope_tables(T, self.hd, self.cfg.rope_base, x.device, offset=pos0)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.cfg.qk_norm:
            q, k = F.rms_norm(q, (self.hd,)), F.rms_norm(k, (self.hd,))
        if self.n_kv != self.n_head:
            k = k.repeat_interleave(self.n_head // self.n_kv, dim=1)
            v = v.repeat_interleave(self.n_head // self.n_kv, dim=1)
        slopes = self.slopes if self.cfg.pos == 'alibi' else None
        p = self.cfg.dropout if self.training else 0.0
        if cache is not None:
            y = self.attend_cached(q, k, v, pos0, cache, slopes)
        elif 0 < self.window < T:
            y = local_attention(q, k, v, self.window, slopes, p)
        elif slopes is not None:
            dist = torch.arange(T, device=x.device)[:, None] - torch.arange(T, device=x.device)[None, :]
            bias = (-slopes[:, None, None] * dist).masked_fill(dist < 0, float('-inf')).to(q.dtype)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)
        y = y.transpose(1, 2).contiguous().view(B, T, self.n_head * self.hd)
        return self.resid_dropout(self.c_proj(y))

    def attend_cached(self, q, k, v, pos0, cache, slopes):
        if 'k' in cache:
            k, v = torch.cat([cache['k'], k], dim=2), torch.cat([cache['v'], v], dim=2)
        if self.window > 0:  # a windowed layer keeps only the w most recent keys
            k, v = k[:, :, -self.window:], v[:, :, -self.window:]
        cache['k'], cache['v'] = k, v
        T, S = q.shape[2], k.shape[2]
        qpos = pos0 + torch.arange(T, device=q.device)[:, None]
        kpos = pos0 + T - S + torch.arange(S, device=q.device)[None, :]
        dist = qpos - kpos
        allowed = (dist >= 0) & ((dist < self.window) if self.window > 0 else True)
        bias = torch.zeros(dist.shape, device=q.device) if slopes is None else -slopes[:, None, None] * dist
        bias = bias.masked_fill(~allowed, float('-inf')).to(q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)


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
        h = self.c_fc(x)
        if self.kind == 'gelu':
            h = F.gelu(h)
        elif self.kind == 'relu2':
            h = F.relu(h).square()
        else:
            h = F.silu(self.c_gate(x)) * h
        return self.dropout(self.c_proj(h))


class Block(nn.Module):

    def __init__(self, cfg, window, has_ve):
        super().__init__()
        self.ln_1 = make_norm(cfg, cfg.n_embd)
        self.attn = CausalSelfAttention(cfg, window, has_ve)
        self.ln_2 = make_norm(cfg, cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x, ve=None, pos0=0, cache=None):
        x = x + self.attn(self.ln_1(x), ve, pos0, cache)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):

    def __init__(self, config):
        super().__init__()
        cfg = self.config = config
        n = cfg.n_layer
        self.has_ve = [cfg.value_embeds and i % 2 == (n - 1) % 2 for i in range(n)]
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
            wpe=nn.Embedding(cfg.block_size, cfg.n_embd) if cfg.pos == 'learned' else None,
            drop=nn.Dropout(cfg.dropout),
            h=nn.ModuleList([Block(cfg, cfg.windows[i], self.has_ve[i]) for i in range(n)]),
            ln_f=make_norm(cfg, cfg.n_embd),
        ))
        kv_dim = cfg.n_kv_head * cfg.head_dim
        self.value_embeds = nn.ModuleDict({str(i): nn.Embedding(cfg.vocab_size, kv_dim)
                                           for i in range(n) if self.has_ve[i]})
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.lm_head.weight = self.transformer.wte.weight
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2: residual projections scaled by depth
            if name.endswith('c_proj.weight'):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n * cfg.n_loop))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self, seq_len):
        cfg = self.config
        per_block = sum(m.weight.numel() for m in self.transformer.h.modules() if isinstance(m, nn.Linear))
        matmul = per_block * cfg.n_loop + cfg.n_embd * cfg.vocab_size
        attn = sum(12 * cfg.n_head * cfg.head_dim * (min(w, seq_len) if w else seq_len) for w in cfg.windows)
        return 6 * matmul + attn * cfg.n_loop

    def _embed(self, idx, pos0):
        T = idx.shape[1]
        x = self.transformer.wte(idx)
        if self.config.pos == 'learned':
            if pos0 + T > self.config.block_size:
                raise ValueError(f"sequence of length {pos0 + T} is longer than block_size {self.config.block_size} (learned positions)")
            x = x + self.transformer.wpe(torch.arange(pos0, pos0 + T, device=idx.device))
        return self.transformer.drop(x)

    def _blocks(self, x, idx, pos0=0, caches=None):
        ves = {i: emb(idx) for i, emb in ((int(k), e) for k, e in self.value_embeds.items())}
        for r in range(self.config.n_loop):
            for i, block in enumerate(self.transformer.h):
                cache = None if caches is None else caches[r * self.config.n_layer + i]
                x = block(x, ves.get(i), pos0, cache)
        return x

    def _head(self, x):
        logits = self.lm_head(self.transformer.ln_f(x))
        if self.config.logit_softcap > 0:
            logits = self.config.logit_softcap * torch.tanh(logits / self.config.logit_softcap)
        return logits

    def forward(self, idx, targets=None):
        logits = self._head(self._blocks(self._embed(idx, 0), idx))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    # incremental decoding with a KV cache (windowed layers keep only their last w keys)
    def decode_init(self, batch_size, device):
        return {'pos': 0, 'caches': [{} for _ in range(self.config.n_layer * self.config.n_loop)]}

    def decode_step(self, idx_t, state):
        idx = idx_t.view(-1, 1)
        x = self._blocks(self._embed(idx, state['pos']), idx, state['pos'], state['caches'])
        state['pos'] += 1
        return self._head(x)[:, -1], state
