"""SnakeBeta in one Triton pass, optionally after a causal conv's history or before a bias column (`pad` columns after
the channels, the first 1 and the rest 0: a following GEMM adds its bias as a weight row)."""
import torch

try:
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice
except ImportError:
    triton = None

if triton is not None:
    @triton.jit
    def _sin(x):
        # the precise sine made the kernel compute-bound
        k = libdevice.rint(x * 0.15915494309189535)
        r = x - k * 6.2831854820251465
        return libdevice.fast_sinf(r + k * 1.7484556000744487e-07)

    @triton.jit
    def _snake_kernel(out_ptr, x_ptr, hist_ptr, alpha_ptr, beta_ptr, bias_ptr, rows, frames, context, channels,
                      out_channels, x_batch_stride, x_time_stride, HAS_BIAS: tl.constexpr, ROWS: tl.constexpr,
                      BLOCK_C: tl.constexpr):
        r = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
        c = tl.arange(0, BLOCK_C)
        live_c = c < channels
        b, t = r // (context + frames), r % (context + frames)
        new = (t >= context) & (r < rows)
        old = (t < context) & (r < rows)
        x = tl.load(x_ptr + (b * x_batch_stride + (t - context) * x_time_stride)[:, None] + c[None, :],
                    mask=new[:, None] & live_c[None, :], other=0.0).to(tl.float32)
        if HAS_BIAS:
            x += tl.load(bias_ptr + c, mask=live_c, other=0.0).to(tl.float32)[None, :]
        alpha = tl.exp(tl.load(alpha_ptr + c, mask=live_c, other=0.0).to(tl.float32))
        inv_beta = 1.0 / (tl.exp(tl.load(beta_ptr + c, mask=live_c, other=0.0).to(tl.float32)) + 1e-9)
        s = _sin(x * alpha[None, :])
        y = x + s * s * inv_beta[None, :]
        h = tl.load(hist_ptr + (b * context + t)[:, None] * channels + c[None, :],
                    mask=old[:, None] & live_c[None, :], other=0.0).to(tl.float32)
        y = tl.where(new[:, None], y, h)
        y = tl.where((c == channels)[None, :], 1.0, y)         # the bias column; past it inputs load as 0, kept 0
        tl.store(out_ptr + r[:, None] * out_channels + c[None, :], y.to(out_ptr.dtype.element_ty),
                 mask=(new | old)[:, None] & (c < out_channels)[None, :])


def _launch(history, x, alpha, beta, bias, pad: int = 0):
    batch, frames, channels = x.shape
    context = 0 if history is None else history.shape[1]
    out = torch.empty(batch, context + frames, channels + pad, dtype=x.dtype, device=x.device)
    block_c = triton.next_power_of_2(channels + pad)
    rows_per = max(1, 4096 // block_c)
    rows = batch * (context + frames)
    _snake_kernel[(triton.cdiv(rows, rows_per),)](
        out, x, x if history is None else history, alpha, beta, x if bias is None else bias, rows, frames, context,
        channels, channels + pad, x.stride(0), x.stride(1), HAS_BIAS=bias is not None, ROWS=rows_per, BLOCK_C=block_c,
        num_warps=4)
    return out


def fits_snake(x, *_) -> bool:
    return x.stride(2) == 1


def fits_snake_after(history, x, *_) -> bool:
    return x.stride(2) == 1 and history.is_contiguous()


def snake(x, alpha, beta, bias=None, pad: int = 0):
    return _launch(None, x, alpha, beta, bias, pad)


def snake_after(history, x, alpha, beta, bias=None):
    return _launch(history, x, alpha, beta, bias)
