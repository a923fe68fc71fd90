"""Decode attention over the paged KV cache: each query reads only its own sequence's live tokens.

A Triton kernel on CUDA (one program per sequence and KV head, online softmax over the sequence's blocks);
the torch reference gathers the blocks into a padded batch and serves the CPU and the tests."""
import torch
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:          # CPU-only installs
    triton = None


def paged_decode_reference(q, k_cache, v_cache, block_tables, context_lens, scale, block_size):
    """q [B, H, D]; caches [slots, KVH, D]; block_tables [B, max_blocks]; context_lens [B] -> [B, H, D]."""
    offsets = torch.arange(block_size, device=q.device)
    index = (block_tables[:, :, None] * block_size + offsets).flatten(1)
    keys, values = k_cache[index].transpose(1, 2), v_cache[index].transpose(1, 2)
    mask = (torch.arange(index.shape[1], device=q.device)[None] < context_lens[:, None])[:, None, None]
    o = F.scaled_dot_product_attention(q[:, :, None], keys, values, attn_mask=mask, scale=scale, enable_gqa=True)
    return o[:, :, 0]


if triton is not None:
    @triton.jit
    def _paged_decode_kernel(q_ptr, k_ptr, v_ptr, o_ptr, tables_ptr, lens_ptr, scale,
                             stride_tables, max_blocks,
                             KV_HEADS: tl.constexpr, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr,
                             D: tl.constexpr, BLOCK: tl.constexpr):
        b = tl.program_id(0)
        kvh = tl.program_id(1)
        length = tl.load(lens_ptr + b)
        rows = tl.arange(0, GROUP_PAD)
        dims = tl.arange(0, D)
        row_ok = rows < GROUP
        heads = kvh * GROUP + rows
        q = tl.load(q_ptr + (b * KV_HEADS * GROUP + heads)[:, None] * D + dims[None, :], mask=row_ok[:, None],
                    other=0.0).to(tl.float32)
        m = tl.full([GROUP_PAD], float("-inf"), tl.float32)
        s = tl.zeros([GROUP_PAD], tl.float32)
        acc = tl.zeros([GROUP_PAD, D], tl.float32)
        tokens = tl.arange(0, BLOCK)
        for i in range(0, tl.cdiv(length, BLOCK)):
            block = tl.load(tables_ptr + b * stride_tables + i)
            pos = i * BLOCK + tokens
            live = pos < length
            slot = block * BLOCK + tokens
            offs = (slot * KV_HEADS + kvh)[:, None] * D + dims[None, :]
            k = tl.load(k_ptr + offs, mask=live[:, None], other=0.0).to(tl.float32)
            v = tl.load(v_ptr + offs, mask=live[:, None], other=0.0).to(tl.float32)
            scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2) * scale
            scores = tl.where(live[None, :], scores, float("-inf"))
            m_new = tl.maximum(m, tl.max(scores, axis=1))
            alpha = tl.exp(m - m_new)
            p = tl.exp(scores - m_new[:, None])
            s = s * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
            m = m_new
        out = acc / s[:, None]
        tl.store(o_ptr + (b * KV_HEADS * GROUP + heads)[:, None] * D + dims[None, :],
                 out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])


USE_KERNEL = True      # False: the torch reference everywhere (GPU equivalence checks)


def paged_decode(q, k_cache, v_cache, block_tables, context_lens, scale, block_size):
    if triton is None or not q.is_cuda or not USE_KERNEL:
        return paged_decode_reference(q, k_cache, v_cache, block_tables, context_lens, scale, block_size)
    b, heads, d = q.shape
    kv_heads = k_cache.shape[1]
    group = heads // kv_heads
    out = torch.empty_like(q)
    _paged_decode_kernel[(b, kv_heads)](q.contiguous(), k_cache, v_cache, out, block_tables, context_lens, scale,
                                        block_tables.stride(0), block_tables.shape[1], KV_HEADS=kv_heads,
                                        GROUP=group, GROUP_PAD=max(2, triton.next_power_of_2(group)), D=d,
                                        BLOCK=block_size)
    return out
