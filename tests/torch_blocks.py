"""Tiny transformer blocks in torch.nn for the torch-mlir frontend tests (no weights are downloaded).

- `LlamaBlock`: RMSNorm, q/k/v/o projections without bias, RoPE (rotate_half, cos/sin from a
  non-persistent inv_freq buffer as in Hugging Face's Llama), SDPA with grouped-query attention
  (enable_gqa) or plain MHA (kv_heads == heads), SwiGLU MLP.
- `GPT2Block`: LayerNorm, fused QKV projection split in three, causal SDPA, tanh-GELU MLP.

Both take x [batch, seq, hidden]; `dynamic_shapes()` names the two free dims `batch` and `seq`, and the
`*_factory` functions are what `estimate --torch tests.torch_blocks:llama_factory` calls.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 (the usual alias)
from torch import nn

HIDDEN, HEADS, KV_HEADS, FFN = 64, 4, 2, 172
EXAMPLE_BATCH, EXAMPLE_SEQ, MAX_SEQ = 2, 8, 4096


class LlamaBlock(nn.Module):
    def __init__(self, hidden: int = HIDDEN, heads: int = HEADS, kv_heads: int = KV_HEADS, ffn: int = FFN):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.norm1, self.norm2 = nn.RMSNorm(hidden, eps=1e-5), nn.RMSNorm(hidden, eps=1e-5)
        self.q = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = self.head_dim // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        freqs = torch.outer(torch.arange(s, device=x.device).float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        h = self.norm1(x)
        q = self.q(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class GPT2Block(nn.Module):
    def __init__(self, hidden: int = HIDDEN, heads: int = HEADS):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc, self.out = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


def example_input() -> torch.Tensor:
    return torch.randn(EXAMPLE_BATCH, EXAMPLE_SEQ, HIDDEN)


def dynamic_shapes() -> dict:
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq", min=2, max=MAX_SEQ)
    return {"x": {0: batch, 1: seq}}


def llama_factory():
    torch.manual_seed(0)
    return LlamaBlock().eval(), (example_input(),), dynamic_shapes()


def gpt2_factory():
    torch.manual_seed(0)
    return GPT2Block().eval(), (example_input(),), dynamic_shapes()


class ConvNet(nn.Module):
    """Conv2d (3 -> 8, 3x3, stride 2, pad 1), BatchNorm, ReLU, grouped 'same' conv, GroupNorm, pools,
    nearest upsampling, ConvTranspose, global pooling, Linear, LogSoftmax; x [batch, 3, 16, 16]."""

    def __init__(self):
        super().__init__()
        self.c1, self.bn = nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8)
        self.c2, self.gn = nn.Conv2d(8, 8, 3, padding="same", groups=2), nn.GroupNorm(2, 8)
        self.up, self.fc = nn.ConvTranspose2d(8, 4, 2, stride=2), nn.Linear(4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn(self.c1(x)))
        y = F.avg_pool2d(F.max_pool2d(self.gn(self.c2(y)), 2), 1)
        y = self.up(F.interpolate(y, scale_factor=2, mode="nearest"))
        return F.log_softmax(self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1)), dim=-1)


class OpZoo(nn.Module):
    """Many aten ops at once (embedding, reductions, masking, topk, cumsum, stack, pad, clamp, einsum,
    gather, select/narrow, chunk/unbind, norms, rsqrt, ne, softmax, silu): ids [batch, seq], x [batch, 5]."""

    def __init__(self):
        super().__init__()
        self.emb, self.ln = nn.Embedding(100, 16), nn.LayerNorm(16)

    def forward(self, ids: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        e = self.ln(self.emb(ids))
        e = (e - e.mean(dim=-1, keepdim=True)) / torch.sqrt(e.var(dim=-1, keepdim=True) + 1e-5)
        e = torch.where(e < -3.0, torch.zeros_like(e), e.masked_fill(e > 3.0, 0.0))
        top, idx = torch.topk(e, 4, dim=-1)
        c = torch.cumsum(e, dim=1)
        mx, am = e.max(dim=-1)
        padded = F.pad(torch.stack([e, c], dim=0).sum(0), (1, 1)).clamp(-1, 1)
        rep = x.unsqueeze(1).expand(-1, 2, -1).reshape(x.shape[0], -1)
        picked = e.select(1, 0) + e[:, -1] + e.narrow(2, 0, 16).sum(1)
        rows = (e.chunk(2, dim=-1)[0].amax(-1) + e.unbind(2)[0] + am.float() + mx + top.sum(-1)
                + torch.linalg.vector_norm(e, dim=-1) + torch.einsum("bsd,bsd->bs", e, c))
        return (padded.sum() + rep.sum() + torch.gather(e, 2, idx).sum() + picked.sum() + rows.sum()
                + e.std() + e.abs().pow(2).sum() + torch.rsqrt(e.abs() + 1).sum() + (e != 0).float().sum()
                + e.softmax(-1).sum() + F.silu(e).sum())
