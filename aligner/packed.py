"""The text model's one-shot `kv` for rows of packed sequences."""
import torch
import torch.nn.functional as F


def additive(allowed: torch.Tensor, dtype) -> torch.Tensor:
    """Made once for every layer (a boolean mask would be converted in each call)."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, float("-inf"))


class PackedKV:
    """Causal within a sequence; padding attends to padding, so no softmax row is empty."""

    def __init__(self, sequences: torch.Tensor, dtype):
        rows, width = sequences.shape
        causal = torch.ones(width, width, dtype=torch.bool, device=sequences.device).tril()
        self.mask = additive(((sequences[:, :, None] == sequences[:, None, :]) & causal)[:, None], dtype)

    def attend(self, layer, q, k, v, scale):
        rows, width = self.mask.shape[0], self.mask.shape[-1]
        q, k, v = (t.unflatten(0, (rows, width)).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask, scale=scale, enable_gqa=True)
        return o.transpose(1, 2).flatten(0, 1)
