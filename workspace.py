"""
Causal Latent Workspaces for Looped Transformers
(our copy of the paper names no authors and no arXiv id). Also the looped controls of its six-row
comparison; the plain 4-block Transformer row is baselines.GPT.

One shared pre-norm causal Transformer block T is applied R = 4 times. Before each application,
round r fuses the current state with the unchanged input anchor e and adds a read from a causal
workspace of S slots, each an m-vector summary of the prefix 1..i. In forward's order:

    e   = E(x) + p,  h^0 = e                                          anchor
    u   = h + A2 GELU(A1 LN_a([h; e]) + a1) + a2                      anchor fusion (Equation 2)
    z   = LN_w(u);  g = sigmoid(W_g z + b_g) (S);  v = tanh(W_v z + b_v) (S x m)    Equation 3
    N_i = sum_{j<=i} g_j v_j,  D_i = sum_{j<=i} g_j,  M_i = N_i / sqrt(D_i)         Equation 4
    alpha_i = softmax_s(k_s . (W_q z_i + b_q) / sqrt(m));  c_i = W_o sum_s alpha_is M_is + b_o
    h^{r+1} = T(u + gamma c)
    logits  = W_LM LN(h^R)                                            untied, bias-free head
retention=True (Equation 5): M^r = rho_r M^{r-1} + (1 - rho_r) M~^r, rho_r = sigmoid(l_r), r >= 1.

variant: 'workspace' (the paper's model) | 'shared_loop' (h^{r+1} = T(h^r)) | 'adaptive_exit'
(shared loop, a softmax router on e mixes the R exits) | 'anchored' (fusion, no workspace) |
'conditioned_dense' (anchored + zero-initialised per-round scale/shift and earlier-exit readout).

Readings (the paper's displayed equations, its Appendix A block and Appendix B dimensions were lost
from the text; the equations above are rebuilt from its prose; how each reading was found and the
dimension solve: docs/workspace.md):
- T is nanoGPT's pre-norm block (LayerNorm with bias, biased q/k/v/out, GELU MLP of width d_ff).
- The widths and d_ff per variant are solved from the parameter counts (Section 6: 101.71M, gaps
  within 6,058 / 474); the workspace model always holds the R-1 retention logits, frozen unless
  retention=True, so both update rules have one parameter count.
- D is clamped at 1e-12 and the sums run in float32; without retention the read is
  sum_s (alpha_s / sqrt(D_s)) N_s, the same number without storing M.
- W_g, W_v, W_q read the same z: one fused Linear (rows S | S*m | m).
- Adaptive exit mixes the exits' next-symbol distributions: logits = log sum_r pi_r softmax(o^r).
- Conditioned-dense: x = u * (1 + s_r) + b_r before the block; readout h^R + sum_{r<R} lambda_r * h^r.
- Init: GPT-2's N(0, 0.02), zero biases, residual outputs (attention, MLP, A2, W_o) at
  0.02 / sqrt(2 R); keys k_s ~ N(0, 1/m); gamma = 0.5.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

VARIANTS = ('workspace', 'shared_loop', 'adaptive_exit', 'anchored', 'conditioned_dense')


@dataclass
class WorkspaceConfig:
    block_size: int = 512          # L
    vocab_size: int = 257          # 256 bytes + the WikiText row separator
    n_embd: int = 224              # d
    n_head: int = 7
    d_ff: int = 643                # feed-forward width f of the shared block
    n_rounds: int = 4              # R
    n_slots: int = 4               # S
    slot_dim: int = 32             # m
    variant: str = 'workspace'
    retention: bool = False        # Equation 5 instead of recomputing M every round
    rho_init: float = 0.2          # retention: l_r = log(rho_init / (1 - rho_init))
    gamma_init: float = 0.5

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {'|'.join(VARIANTS)}, got {self.variant!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        if self.retention and self.variant != 'workspace':
            raise ValueError("retention applies to variant='workspace' only")


# ----------------------------------------------------------------------------- the shared block
class CausalSelfAttention(nn.Module):

    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                   for t in self.c_attn(x).split(C, dim=2))                 # (B, H, T, C / H) each
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))               # (B, T, C)


class Block(nn.Module):
    """T_theta: one pre-norm causal Transformer block."""

    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.c_fc = nn.Linear(cfg.n_embd, cfg.d_ff)
        self.c_proj = nn.Linear(cfg.d_ff, cfg.n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))              # (B, T, d_ff) -> (B, T, C)


# ----------------------------------------------------------------------------- anchor and workspace
class AnchorFusion(nn.Module):
    """Equation 2: u = h + A2 GELU(A1 LN_a([h; e]) + a1) + a2."""

    def __init__(self, d):
        super().__init__()
        self.ln_a = nn.LayerNorm(2 * d)
        self.A1 = nn.Linear(2 * d, d)
        self.A2 = nn.Linear(d, d)

    def forward(self, h, e):
        return h + self.A2(F.gelu(self.A1(self.ln_a(torch.cat([h, e], dim=-1)))))   # [h; e] (B, L, 2d) -> (B, L, d)


EPS = 1e-12  # guards D = 0 (only when every gate underflows; then N = 0 too and M = 0)


def prefix_summaries_reference(g, v):
    """Equation 4 as written, one position at a time (float64): M_i = N_i / sqrt(D_i) with
    N_i = sum_{j<=i} g_j v_j and D_i = sum_{j<=i} g_j, the current position included.
    prefix_sums and summaries below compute the same for all positions at once."""
    B, L, S, m = v.shape
    M = torch.zeros(B, L, S, m, dtype=torch.float64, device=v.device)
    for i in range(L):
        N = (g[:, :i + 1, :, None].double() * v[:, :i + 1].double()).sum(1)
        D = g[:, :i + 1].double().sum(1)
        M[:, i] = N / D.clamp_min(EPS).sqrt()[..., None]
    return M


def prefix_sums(g, v):
    """N_is = sum_{j<=i} g_js v_js and D_is = sum_{j<=i} g_js: causal cumulative sums over the
    sequence, the current position included. g: (B, L, S), v: (B, L, S, m); float32 sums."""
    return (g.unsqueeze(-1) * v).float().cumsum(dim=1), g.float().cumsum(dim=1)


def summaries(N, D):
    """M~_is = N_is / sqrt(D_is) (Equation 4), (B, L, S, m), all positions at once."""
    return N * D.clamp_min(EPS).rsqrt().unsqueeze(-1)


def prefix_summaries(g, v):
    return summaries(*prefix_sums(g, v))


class SlotWorkspace(nn.Module):
    """Equations 3-8: gated causal slot writes, prefix summaries, learned-key slot reads."""

    def __init__(self, cfg):
        super().__init__()
        d, self.S, self.m = cfg.n_embd, cfg.n_slots, cfg.slot_dim
        self.ln_w = nn.LayerNorm(d)
        self.W_gvq = nn.Linear(d, self.S + self.S * self.m + self.m)  # [W_g; W_v; W_q] and biases
        self.keys = nn.Parameter(torch.randn(self.S, self.m) / math.sqrt(self.m))
        self.W_o = nn.Linear(self.m, d)
        self.gamma = nn.Parameter(torch.tensor(cfg.gamma_init))

    def writes(self, u):
        """Gates g (B, L, S) in (0, 1), values v (B, L, S, m) in (-1, 1), queries q (B, L, m)."""
        B, L, _ = u.shape
        g, v, q = self.W_gvq(self.ln_w(u)).split([self.S, self.S * self.m, self.m], dim=-1)
        return torch.sigmoid(g), torch.tanh(v).view(B, L, self.S, self.m), q

    def read_weights(self, q):
        """alpha (B, L, S): softmax over slots of k_s . q / sqrt(m)."""
        return torch.softmax(q @ self.keys.t() / math.sqrt(self.m), dim=-1)

    def forward(self, u, M_prev=None, rho=None, keep=False):
        """gamma c (B, L, d), and this round's summaries M (B, L, S, m) when retention needs them
        (M_prev given, or keep=True for the next round), else None."""
        g, v, q = self.writes(u)
        N, D = prefix_sums(g, v)                                             # (B, L, S, m), (B, L, S)
        alpha = self.read_weights(q).float()                                 # (B, L, S)
        if M_prev is None and not keep:
            # sum_s alpha_s M_s = sum_s (alpha_s / sqrt(D_s)) N_s: M is never materialised
            read, M = ((alpha * D.clamp_min(EPS).rsqrt()).unsqueeze(-1) * N).sum(dim=2), None   # (B, L, m)
        else:
            M = summaries(N, D)
            if M_prev is not None:  # retention (Equation 5): blend at the same prefix position
                M = rho * M_prev + (1 - rho) * M
            read = (alpha.unsqueeze(-1) * M).sum(dim=2)                      # (B, L, m)
        self.last_gate = g.detach().mean()
        return self.gamma * self.W_o(read.to(u.dtype)), M                    # (B, L, d)


# ----------------------------------------------------------------------------- the model
class Workspace(nn.Module):
    knobs = ('rounds',)   # the forward's runtime control: rounds of the shared block (None: n_rounds)

    def __init__(self, config):
        super().__init__()
        cfg = self.config = config
        d, R = cfg.n_embd, cfg.n_rounds
        self.wte = nn.Embedding(cfg.vocab_size, d)
        self.wpe = nn.Embedding(cfg.block_size, d)
        anchored = cfg.variant in ('anchored', 'conditioned_dense', 'workspace')
        self.fusion = AnchorFusion(d) if anchored else None
        self.workspace = SlotWorkspace(cfg) if cfg.variant == 'workspace' else None
        self.block = Block(cfg)
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, cfg.vocab_size, bias=False)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # residual outputs, R applications (GPT-2 scaling)
            if name.endswith(('c_proj.weight', 'A2.weight', 'W_o.weight')):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * R))
        if cfg.variant == 'workspace':
            # l_1..l_{R-1}; frozen (and unused) when the main model recomputes every round
            l0 = math.log(cfg.rho_init / (1 - cfg.rho_init))
            self.retain_logit = nn.Parameter(torch.full((R - 1,), l0), requires_grad=cfg.retention)
        if cfg.variant == 'adaptive_exit':
            self.router = nn.Linear(d, R)
            nn.init.zeros_(self.router.weight)  # uniform mixture at init
            nn.init.zeros_(self.router.bias)
        if cfg.variant == 'conditioned_dense':
            self.cond_scale = nn.Parameter(torch.zeros(R, d))
            self.cond_shift = nn.Parameter(torch.zeros(R, d))
            self.readout = nn.Parameter(torch.zeros(R - 1, d))

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def optim_groups(self, weight_decay):
        """AdamW weight decay on the weight matrices of Linear and Embedding layers only: not on
        biases, LayerNorms, gamma, the slot keys, the retention logits, or conditioned-dense's
        scale, shift and readout vectors (2-D tensors, so decay by shape would take them)."""
        matrices = {id(m.weight) for m in self.modules() if isinstance(m, (nn.Linear, nn.Embedding))}
        decay = [p for p in self.parameters() if id(p) in matrices]
        rest = [p for p in self.parameters() if id(p) not in matrices]
        return [{'params': decay, 'weight_decay': weight_decay}, {'params': rest, 'weight_decay': 0.0}]

    def flops_per_token(self, seq_len):
        cfg, d, R = self.config, self.config.n_embd, self.config.n_rounds
        per_round = sum(m.weight.numel() for m in self.block.modules() if isinstance(m, nn.Linear))
        if self.fusion is not None:
            per_round += self.fusion.A1.weight.numel() + self.fusion.A2.weight.numel()
        if self.workspace is not None:  # projections + key scores + slot read
            per_round += self.workspace.W_gvq.weight.numel() + self.workspace.W_o.weight.numel()
            per_round += 2 * cfg.n_slots * cfg.slot_dim
        heads = R if cfg.variant == 'adaptive_exit' else 1  # every exit is computed
        matmul = R * per_round + heads * d * cfg.vocab_size + (d * R if cfg.variant == 'adaptive_exit' else 0)
        return 6 * matmul + R * 12 * d * seq_len

    def train_stats(self):
        stats = {}
        if self.workspace is not None:
            stats['gamma'] = self.workspace.gamma.item()
            if hasattr(self.workspace, 'last_gate'):
                stats['write_gate'] = self.workspace.last_gate.item()
            if self.config.retention:
                stats.update({f'rho{r + 1}': p for r, p in enumerate(torch.sigmoid(self.retain_logit).tolist())})
        return stats

    def forward(self, idx, targets=None, rounds=None):
        cfg = self.config
        B, T = idx.shape
        if T > cfg.block_size:
            raise ValueError(f"sequence of length {T} is longer than block_size {cfg.block_size} (learned positions)")
        R = cfg.n_rounds if rounds is None else rounds
        if R != cfg.n_rounds and (cfg.variant in ('adaptive_exit', 'conditioned_dense') or cfg.retention):
            raise ValueError(f"rounds={R}: this {cfg.variant}{' with retention' if cfg.retention else ''} has "
                             f"parameters for each of its n_rounds={cfg.n_rounds} rounds and runs only that many")
        e = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))     # anchor, (B, T, d)
        h, M, exits = e, None, []
        for r in range(R):
            x = h if self.fusion is None else self.fusion(h, e)
            if self.workspace is not None:
                rho = torch.sigmoid(self.retain_logit[r - 1]) if cfg.retention and r > 0 else None
                c, M = self.workspace(x, M, rho, keep=cfg.retention)
                x = x + c
            if cfg.variant == 'conditioned_dense':
                x = x * (1 + self.cond_scale[r]) + self.cond_shift[r]
            h = self.block(x)
            exits.append(h)
        if cfg.variant == 'adaptive_exit':
            log_pi = F.log_softmax(self.router(e).float(), dim=-1)                           # (B, T, R)
            log_p = torch.stack([F.log_softmax(self.lm_head(self.ln_f(x)).float(), dim=-1) for x in exits], -1)
            logits = torch.logsumexp(log_p + log_pi.unsqueeze(2), dim=-1)   # log mixture: (B, T, V, R) -> (B, T, V)
        else:
            if cfg.variant == 'conditioned_dense':
                h = h + sum(self.readout[r] * exits[r] for r in range(cfg.n_rounds - 1))
            logits = self.lm_head(self.ln_f(h))                                   # (B, T, vocab)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        return logits, loss
