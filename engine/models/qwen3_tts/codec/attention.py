"""Self-attention with RoPE for the codec transformers, optionally through a per-slot window KV cache."""
import torch
import torch.nn.functional as F
from torch import nn

from engine.kernels.registry import ops
from engine.models.qwen3_tts.codec.layers import Stateful


def rope_inv_freq(head_dim: int, theta: float, device: torch.device) -> torch.Tensor:
    # float32: positions grow without bound in a stream
    return 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim)


def rope_cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype):
    freqs = positions[..., None].float() * inv_freq
    angles = torch.cat([freqs, freqs], dim=-1)[:, None]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def attention_mask(query_pos: torch.Tensor, key_pos: torch.Tensor, window: int | None) -> torch.Tensor:
    distance = query_pos[:, :, None] - key_pos[:, None, :]
    mask = (distance >= 0) & (key_pos[:, None, :] >= 0)
    if window is not None:
        mask &= distance < window
    return mask[:, None]


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class Attention(Stateful):
    """With a `window`, each stream's last `window` keys/values live in a ring (entry: position % window)."""

    def __init__(self, hidden_size: int, num_heads: int, num_kv_heads: int, head_dim: int, bias: bool = False,
                 window: int | None = None):
        super().__init__()
        self.head_dim = head_dim
        self.grouped = num_heads != num_kv_heads
        self.q_proj = nn.Linear(hidden_size, num_heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(num_heads * head_dim, hidden_size, bias=bias)
        self.cached = window or 0
        if self.cached:
            self.add_state("keys", (num_kv_heads, self.cached, head_dim))
            self.add_state("values", (num_kv_heads, self.cached, head_dim))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor | None,
                slots: torch.Tensor | None, positions: torch.Tensor | None = None) -> torch.Tensor:
        """mask [B, 1, T, cached + T] (ring frames first), or None: one new frame a stream, attended in its ring in
        place; positions [B, T]: the new frames'."""
        batch, frames, _ = x.shape
        q, k, v = (proj(x).view(batch, frames, -1, self.head_dim).transpose(1, 2)
                   for proj in (self.q_proj, self.k_proj, self.v_proj))
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if mask is None:
            out = ops.ring_attention(*(t.reshape(batch, -1, self.head_dim) for t in (q, k, v)), self.keys,
                                     self.values, slots, positions[:, 0], self.head_dim ** -0.5)
            return self.o_proj(out.reshape(batch, 1, -1))
        if self.cached:
            ring = positions % self.cached
            k, v = (self._remember(name, slots, new, ring) for name, new in (("keys", k), ("values", v)))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.grouped)
        return self.o_proj(out.transpose(1, 2).reshape(batch, frames, -1))

    def _remember(self, name: str, slots: torch.Tensor | None, new: torch.Tensor, ring: torch.Tensor) -> torch.Tensor:
        keys = torch.cat([self.read_state(name, slots, new), new], dim=2)
        if slots is not None:
            n = min(new.shape[2], self.cached)
            getattr(self, name)[slots[:, None], :, ring[:, -n:]] = new[:, :, -n:].transpose(1, 2)
        return keys
