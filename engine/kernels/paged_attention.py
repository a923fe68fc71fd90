"""Attention over the paged KV cache; a prompt row's context ends at its own position (causal prefill). A cache of
another dtype than the queries (fp8) is written rounded to it and read back in the queries' dtype."""
import torch
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None

LAUNCH = dict(num_warps=4, num_stages=3)      # Triton's defaults; bench/attention_bench.py sweeps them


def paged_attention_reference(q, k_cache, v_cache, block_tables, context_lens, scale, block_size, rows=256):
    if q.shape[0] > rows:
        return torch.cat([paged_attention_reference(q[i:i + rows], k_cache, v_cache, block_tables[i:i + rows],
                                                    context_lens[i:i + rows], scale, block_size, rows)
                          for i in range(0, q.shape[0], rows)])
    block_tables = block_tables[:, :-(-int(context_lens.max()) // block_size)]
    offsets = torch.arange(block_size, device=q.device)
    index = (block_tables[:, :, None] * block_size + offsets).flatten(1)
    keys, values = (gather_rows(cache, index).transpose(1, 2).to(q.dtype) for cache in (k_cache, v_cache))
    mask = (torch.arange(index.shape[1], device=q.device)[None] < context_lens[:, None])[:, None, None]
    o = F.scaled_dot_product_attention(q[:, :, None], keys, values, attn_mask=mask, scale=scale, enable_gqa=True)
    return o[:, :, 0]


if triton is not None:
    @triton.jit
    def _paged_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, tables_ptr, lens_ptr, scale, stride_tables,
                             k_new_ptr, v_new_ptr, slots_ptr, stride_k_new, stride_v_new,
                             KV_HEADS: tl.constexpr, GROUP: tl.constexpr, ROWS: tl.constexpr, D: tl.constexpr,
                             BLOCK: tl.constexpr, IEEE: tl.constexpr, WRITE: tl.constexpr):
        b = tl.program_id(0)
        kvh = tl.program_id(1)
        length = tl.load(lens_ptr + b)
        rows = tl.arange(0, ROWS)
        dims = tl.arange(0, D)
        if WRITE:
            slot = tl.load(slots_ptr + b)
            at = (slot * KV_HEADS + kvh) * D + dims
            tl.store(k_ptr + at, tl.load(k_new_ptr + b * stride_k_new + kvh * D + dims).to(k_ptr.dtype.element_ty))
            tl.store(v_ptr + at, tl.load(v_new_ptr + b * stride_v_new + kvh * D + dims).to(v_ptr.dtype.element_ty))
            tl.debug_barrier()
        row_ok = rows < GROUP
        q_offs = (b * KV_HEADS * GROUP + kvh * GROUP + rows)[:, None] * D + dims[None, :]
        q = tl.load(q_ptr + q_offs, mask=row_ok[:, None], other=0.0)
        m = tl.full([ROWS], float("-inf"), tl.float32)
        s = tl.zeros([ROWS], tl.float32)
        acc = tl.zeros([ROWS, D], tl.float32)
        tokens = tl.arange(0, BLOCK)
        precision: tl.constexpr = "ieee" if IEEE else "tf32"
        for i in range(0, tl.cdiv(length, BLOCK)):
            block = tl.load(tables_ptr + b * stride_tables + i)
            live = i * BLOCK + tokens < length
            offs = ((block * BLOCK + tokens) * KV_HEADS + kvh)[:, None] * D + dims[None, :]
            k = tl.load(k_ptr + offs, mask=live[:, None], other=0.0).to(q.dtype)
            v = tl.load(v_ptr + offs, mask=live[:, None], other=0.0).to(q.dtype)
            scores = tl.dot(q, tl.trans(k), input_precision=precision) * scale
            scores = tl.where(live[None, :], scores, float("-inf"))
            m_new = tl.maximum(m, tl.max(scores, axis=1))
            alpha = tl.exp(m - m_new)
            p = tl.exp(scores - m_new[:, None])
            s = s * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=precision)
            m = m_new
        tl.store(o_ptr + q_offs, (acc / s[:, None]).to(o_ptr.dtype.element_ty), mask=row_ok[:, None])


def as_bytes(cache):
    """A one-byte cache (fp8) as uint8, which every gather and scatter takes; others as they are."""
    return cache.view(torch.uint8) if cache.element_size() == 1 else cache


def gather_rows(cache, index):
    return as_bytes(cache)[index].view(cache.dtype)


def write(k_cache, v_cache, new) -> None:
    """Rounded to the cache's dtype; fp8 saturates at its largest value, as the kernel's write does, never NaN."""
    k, v, slots = new
    for cache, x in ((k_cache, k), (v_cache, v)):
        if cache.element_size() == 1:
            x = x.clamp(-torch.finfo(cache.dtype).max, torch.finfo(cache.dtype).max)
        as_bytes(cache)[slots] = as_bytes(x.to(cache.dtype))


def paged_attention_torch(q, k_cache, v_cache, block_tables, context_lens, scale, block_size, new=None,
                          one_per_stream=False):
    if new is not None:
        write(k_cache, v_cache, new)
    return paged_attention_reference(q, k_cache, v_cache, block_tables, context_lens, scale, block_size)


def paged_attention(q, k_cache, v_cache, block_tables, context_lens, scale, block_size, new=None,
                    one_per_stream=False):
    """Rows of one prompt read each other's keys, so only decode writes them in the kernel."""
    fused = new is not None and one_per_stream and all(t.stride(-1) == 1 and t.stride(1) == t.shape[2] for t in new[:2])
    if new is not None and not fused:
        write(k_cache, v_cache, new)
    b, heads, d = q.shape
    kv_heads = k_cache.shape[1]
    group = heads // kv_heads
    out = torch.empty_like(q)
    k_new, v_new, slots = new if fused else (q, q, context_lens)
    _paged_attention_kernel[(b, kv_heads)](q.contiguous(), k_cache, v_cache, out, block_tables, context_lens, scale,
                                        block_tables.stride(0), k_new, v_new, slots, k_new.stride(0),
                                        v_new.stride(0), KV_HEADS=kv_heads, GROUP=group,
                                        ROWS=max(16, triton.next_power_of_2(group)), D=d, BLOCK=block_size,
                                        IEEE=q.dtype == torch.float32, WRITE=fused, **LAUNCH)
    return out
