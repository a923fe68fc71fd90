"""Sequences packed into rows of fixed length (aligner/layout.py): the text model's one-shot `kv` for engine/models/qwen3.py."""
import torch
import torch.nn.functional as F


def additive(allowed: torch.Tensor, dtype) -> torch.Tensor:
    """A boolean attention mask as the bias SDPA adds to the scores, made once for every layer (a boolean mask
    would be converted in each call)."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, float("-inf"))


class PackedKV:
    """No cache: each token attends causally within its own sequence of its row. A padding token (sequence -1)
    attends to the padding before it, so every row of the softmax has a key."""

    def __init__(self, sequences: torch.Tensor, dtype):
        rows, width = sequences.shape
        causal = torch.ones(width, width, dtype=torch.bool, device=sequences.device).tril()
        self.mask = additive(((sequences[:, :, None] == sequences[:, None, :]) & causal)[:, None], dtype)

    def attend(self, layer, q, k, v, scale):
        """q [rows * width, heads, d], k/v [rows * width, kv_heads, d] -> like q."""
        rows, width = self.mask.shape[0], self.mask.shape[-1]
        q, k, v = (t.unflatten(0, (rows, width)).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask, scale=scale, enable_gqa=True)
        return o.transpose(1, 2).flatten(0, 1)
