"""One new frame per stream attending to its sliding window, kept in a per-slot ring (the codec decoder's transformer):
the frame's key and value go to ring entry position % W, then its query attends to the ring's live entries."""
import torch
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None


def ring_attention_torch(q, k, v, keys, values, slots, positions, scale: float):
    """q/k/v [B, H, D] at `positions` [B]; keys/values [S, H, W, D] -> [B, H, D]."""
    w = keys.shape[2]
    ring = positions % w
    keys[slots, :, ring] = k
    values[slots, :, ring] = v
    live = torch.arange(w, device=q.device)[None] <= positions[:, None]    # a ring fills from entry 0
    o = F.scaled_dot_product_attention(q[:, :, None], keys[slots], values[slots], attn_mask=live[:, None, None],
                                       scale=scale)
    return o[:, :, 0]


def fits(q, k, v, keys, values, slots, positions, _) -> bool:
    return all(t.is_contiguous() for t in (q, k, v, keys, values, slots, positions))


if triton is not None:
    @triton.jit
    def _ring_attention_kernel(q_ptr, k_ptr, v_ptr, keys_ptr, values_ptr, o_ptr, slots_ptr, pos_ptr, scale,
                               HEADS: tl.constexpr, W: tl.constexpr, WP: tl.constexpr, D: tl.constexpr):
        b, h = tl.program_id(0), tl.program_id(1)
        d = tl.arange(0, D)
        pos = tl.load(pos_ptr + b)
        row = (tl.load(slots_ptr + b).to(tl.int64) * HEADS + h) * W
        new = (b * HEADS + h) * D + d
        tl.store(keys_ptr + (row + pos % W) * D + d, tl.load(k_ptr + new))
        tl.store(values_ptr + (row + pos % W) * D + d, tl.load(v_ptr + new))
        tl.debug_barrier()
        j = tl.arange(0, WP)
        live = (j <= pos) & (j < W)
        at = (row + j)[:, None] * D + d[None, :]
        q = tl.load(q_ptr + new).to(tl.float32)
        s = tl.sum(tl.load(keys_ptr + at, mask=live[:, None], other=0.0).to(tl.float32) * q[None, :], axis=1) * scale
        s = tl.where(live, s, float("-inf"))
        p = tl.exp(s - tl.max(s, 0))
        o = tl.sum(tl.load(values_ptr + at, mask=live[:, None], other=0.0).to(tl.float32) * p[:, None], 0)
        tl.store(o_ptr + new, (o / tl.sum(p, 0)).to(o_ptr.dtype.element_ty))


def ring_attention(q, k, v, keys, values, slots, positions, scale: float):
    b, heads, d = q.shape
    w = keys.shape[2]
    out = torch.empty_like(q)
    _ring_attention_kernel[(b, heads)](q, k, v, keys, values, out, slots, positions, scale, HEADS=heads, W=w,
                                       WP=triton.next_power_of_2(w), D=d)
    return out
