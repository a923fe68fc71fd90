"""The decoder layer for at most TILE_ROWS rows in five Triton kernels: at few rows, launches dominate."""
import torch

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None

TILE_ROWS = 16


if triton is not None:
    @triton.jit
    def _rstd(x_ptr, stride_x, M, K: tl.constexpr, eps, ROWS: tl.constexpr, BLOCK_K: tl.constexpr):
        rows = tl.arange(0, ROWS)
        total = tl.zeros([ROWS], tl.float32)
        for k0 in range(0, K, BLOCK_K):
            cols = k0 + tl.arange(0, BLOCK_K)
            x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :],
                        mask=(rows[:, None] < M) & (cols[None, :] < K), other=0.0).to(tl.float32)
            total += tl.sum(x * x, axis=1)
        return tl.math.rsqrt(total / K + eps)

    @triton.jit
    def _rows(x_ptr, stride_x, norm_ptr, rstd, k0, M, K: tl.constexpr, NORM: tl.constexpr, ROWS: tl.constexpr,
              BLOCK_K: tl.constexpr):
        rows = tl.arange(0, ROWS)
        cols = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :],
                    mask=(rows[:, None] < M) & (cols[None, :] < K), other=0.0)
        if NORM:
            w = tl.load(norm_ptr + cols, mask=cols < K, other=0.0).to(tl.float32)
            x = (w[None, :] * (x.to(tl.float32) * rstd[:, None]).to(x.dtype).to(tl.float32)).to(x.dtype)
        return x

    @triton.jit
    def _product(x_ptr, stride_x, norm_ptr, w_ptr, out_rows, M, K: tl.constexpr, eps, NORM: tl.constexpr,
                 ROWS: tl.constexpr, BLOCK_K: tl.constexpr, IEEE: tl.constexpr):
        rstd = tl.zeros([ROWS], tl.float32)
        if NORM:
            rstd = _rstd(x_ptr, stride_x, M, K, eps, ROWS, BLOCK_K)
        acc = tl.zeros([ROWS, out_rows.shape[0]], tl.float32)
        precision: tl.constexpr = "ieee" if IEEE else "tf32"
        for k0 in range(0, K, BLOCK_K):
            x = _rows(x_ptr, stride_x, norm_ptr, rstd, k0, M, K, NORM, ROWS, BLOCK_K)
            cols = k0 + tl.arange(0, BLOCK_K)
            w = tl.load(w_ptr + out_rows[None, :] * K + cols[:, None], mask=cols[:, None] < K, other=0.0)
            acc = tl.dot(x, w, acc, input_precision=precision)
        return acc

    @triton.jit
    def _qk_norm_rope_kernel(qkv_ptr, qn_ptr, kn_ptr, cos_ptr, sin_ptr, q_ptr, k_ptr, M, stride_qkv, stride_cs, eps,
                             HEADS: tl.constexpr, KV_HEADS: tl.constexpr, D: tl.constexpr, ROWS: tl.constexpr):
        head = tl.program_id(0)
        half: tl.constexpr = D // 2
        j = tl.arange(0, half)[None, :]
        m = tl.arange(0, ROWS)[:, None]
        live = m < M
        at = qkv_ptr + m * stride_qkv + head * D + j
        lo = tl.load(at, mask=live, other=0.0).to(tl.float32)
        hi = tl.load(at + half, mask=live, other=0.0).to(tl.float32)
        n_ptr = qn_ptr
        if head >= HEADS:
            n_ptr = kn_ptr
        dtype = q_ptr.dtype.element_ty
        rstd = tl.math.rsqrt((tl.sum(lo * lo, axis=1) + tl.sum(hi * hi, axis=1)) / D + eps)[:, None]
        lo = (tl.load(n_ptr + j).to(tl.float32) * (lo * rstd).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
        hi = (tl.load(n_ptr + half + j).to(tl.float32) * (hi * rstd).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
        cs = m * stride_cs + j
        cos_lo, cos_hi = tl.load(cos_ptr + cs, mask=live, other=0.0), tl.load(cos_ptr + cs + half, mask=live, other=0.0)
        sin_lo, sin_hi = tl.load(sin_ptr + cs, mask=live, other=0.0), tl.load(sin_ptr + cs + half, mask=live, other=0.0)
        out_lo = lo * cos_lo.to(tl.float32) - hi * sin_lo.to(tl.float32)
        out_hi = hi * cos_hi.to(tl.float32) + lo * sin_hi.to(tl.float32)
        if head < HEADS:
            at = q_ptr + m * (HEADS * D) + head * D + j
        else:
            at = k_ptr + m * (KV_HEADS * D) + (head - HEADS) * D + j
        tl.store(at, out_lo.to(dtype), mask=live)
        tl.store(at + half, out_hi.to(dtype), mask=live)

    @triton.jit
    def _linear_kernel(x_ptr, norm_ptr, w_ptr, res_ptr, out_ptr, M, N: tl.constexpr, K: tl.constexpr, stride_x, eps,
                       NORM: tl.constexpr, GATED: tl.constexpr, RESIDUAL: tl.constexpr, ROWS: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, IEEE: tl.constexpr):
        """GATED: W holds gate rows then up rows."""
        n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        dtype = out_ptr.dtype.element_ty
        if GATED:
            r = tl.arange(0, 2 * BLOCK_N)
            rows = tl.program_id(0) * BLOCK_N + r % BLOCK_N + (r // BLOCK_N) * N
            acc = _product(x_ptr, stride_x, norm_ptr, w_ptr, rows, M, K, eps, NORM, ROWS, BLOCK_K, IEEE)
            halves = tl.permute(tl.reshape(acc.to(dtype).to(tl.float32), [ROWS, 2, BLOCK_N]), (0, 2, 1))
            g, up = tl.split(halves)
            y = ((g / (1.0 + tl.exp(-g))).to(dtype).to(tl.float32) * up).to(dtype)
        else:
            y = _product(x_ptr, stride_x, norm_ptr, w_ptr, n, M, K, eps, NORM, ROWS, BLOCK_K, IEEE).to(dtype)
        m = tl.arange(0, ROWS)[:, None]
        offs = m * N + n[None, :]
        if RESIDUAL:
            y = (tl.load(res_ptr + offs, mask=m < M, other=0.0).to(tl.float32) + y.to(tl.float32)).to(dtype)
        tl.store(out_ptr + offs, y, mask=m < M)


def _few_rows(x, max_rows: int) -> bool:
    return x.dim() == 2 and x.shape[0] <= min(max_rows, TILE_ROWS) and x.stride(1) == 1


def fits_attention_inputs(max_rows: int, x, norm_w, w_qkv, q_size, q_norm_w, k_norm_w, cos, *_) -> bool:
    return _few_rows(x, max_rows) and w_qkv.is_contiguous() and cos.stride(1) == 1


def fits_output_and_mlp(max_rows: int, x, attn, *_) -> bool:
    return _few_rows(x, max_rows) and _few_rows(attn, max_rows)


CONFIG: dict = {}


def _config(n: int, k: int, gated: bool, dtype) -> tuple:
    return CONFIG.get((n, k, gated, dtype), (16 if n <= 1024 else 32, 256, 2 if dtype == torch.float32 else 4, 4))


def _linear(x, w, norm_w=None, res=None, gated=False, eps=0.0):
    m, k = x.shape
    n = w.shape[0] // 2 if gated else w.shape[0]
    out = torch.empty(m, n, dtype=x.dtype, device=x.device)
    block_n, block_k, stages, warps = _config(n, k, gated, x.dtype)
    _linear_kernel[(triton.cdiv(n, block_n),)](
        x, x if norm_w is None else norm_w, w, x if res is None else res, out, m, n, k, x.stride(0), eps,
        NORM=norm_w is not None, GATED=gated, RESIDUAL=res is not None, ROWS=TILE_ROWS, BLOCK_N=block_n,
        BLOCK_K=block_k, IEEE=x.dtype == torch.float32, num_warps=warps, num_stages=stages)
    return out


def attention_inputs(x, norm_w, w_qkv, q_size, q_norm_w, k_norm_w, cos, sin, eps, head_dim):
    m = x.shape[0]
    heads, kv_size = q_size // head_dim, (w_qkv.shape[0] - q_size) // 2
    cos, sin = cos.expand(m, -1), sin.expand(m, -1)
    qkv = _linear(x, w_qkv, norm_w=norm_w, eps=eps)
    q = torch.empty(m, heads, head_dim, dtype=x.dtype, device=x.device)
    k = torch.empty(m, kv_size // head_dim, head_dim, dtype=x.dtype, device=x.device)
    _qk_norm_rope_kernel[(heads + kv_size // head_dim,)](
        qkv, q_norm_w, k_norm_w, cos, sin, q, k, m, qkv.stride(0), cos.stride(0), eps, HEADS=heads,
        KV_HEADS=kv_size // head_dim, D=head_dim, ROWS=TILE_ROWS, num_warps=4)
    return q, k, qkv[:, q_size + kv_size:].view(m, -1, head_dim)


def attention_output_and_mlp(x, attn, wo, norm_w, w_gate_up, w_down, eps):
    x = _linear(attn, wo, res=x)
    return _linear(_linear(x, w_gate_up, norm_w=norm_w, gated=True, eps=eps), w_down, res=x)
