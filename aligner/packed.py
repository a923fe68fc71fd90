"""Ragged sequences packed as rows [N, ...]: attention over each sequence alone, in one padded SDPA call."""
import numpy as np
import torch
import torch.nn.functional as F


class Packed:
    """Sequences of `lengths` rows, back to back; gathers them into a right-padded [B, L, ...] batch and back,
    with indices built once on the host (no device sync per layer)."""

    def __init__(self, lengths: list[int], device):
        lengths = np.asarray(lengths)
        width = int(lengths.max())
        cols = np.arange(width)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        valid = cols[None, :] < lengths[:, None]
        self.index = torch.from_numpy(np.where(valid, starts[:, None] + cols[None, :], 0)).to(device)
        self.rows = torch.from_numpy(np.flatnonzero(valid)).to(device)
        self.keys = torch.from_numpy(valid).to(device)[:, None, None, :]     # [B, 1, 1, L]
        self.width = width

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        return x[self.index]

    def unpad(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(0, 1)[self.rows]

    def attend(self, q, k, v, scale: float, causal: bool) -> torch.Tensor:
        """q [N, heads, d], k/v [N, kv_heads, d] -> [N, heads, d]; causal, or bidirectional within a sequence."""
        q, k, v = (self.pad(t).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=None if causal else self.keys, is_causal=causal,
                                           scale=scale, enable_gqa=True)
        return self.unpad(o.transpose(1, 2))


class CausalKV:
    """The `kv` object of engine.layers for a one-shot forward: no cache, causal within each sequence (right
    padding: a real query never sees a padded key)."""

    def __init__(self, packed: Packed):
        self.packed = packed

    def attend(self, layer, q, k, v, scale):
        return self.packed.attend(q, k, v, scale, causal=True)
