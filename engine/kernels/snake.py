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
    def _activate(x, alpha, inv_beta):
        """SnakeBeta of float32 `x` with exp(alpha) and 1/(exp(beta)+eps) precomputed (broadcast to x)."""
        s = _sin(x * alpha)
        return x + s * s * inv_beta

    @triton.jit
    def _snake_kernel(out_ptr, x_ptr, hist_ptr, table_ptr, bias_ptr, frames, context, x_batch_stride,
                      x_time_stride, C: tl.constexpr, OUT_C: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
        # flat over one batch row's output [context + frames, OUT_C]: constant widths make the row and column a
        # multiply and shift, and whole blocks load and store vectorized (a [rows, pow2] tile reached ~40% of HBM)
        b = tl.program_id(1).to(tl.int64)
        o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        row, col = o // OUT_C, o % OUT_C
        live = row < context + frames
        old = live & (row < context)
        channel = col < C
        x = tl.load(x_ptr + b * x_batch_stride + (row - context) * x_time_stride + col,
                    mask=live & ~old & channel, other=0.0).to(tl.float32)
        if HAS_BIAS:
            x += tl.load(bias_ptr + col, mask=channel, other=0.0).to(tl.float32)
        y = _activate(x, tl.load(table_ptr + col, mask=channel, other=0.0),     # a table: no exp per element
                      tl.load(table_ptr + C + col, mask=channel, other=0.0))     # past the channels: 0
        h = tl.load(hist_ptr + b * context * C + o, mask=old, other=0.0).to(tl.float32)   # history: OUT_C == C
        y = tl.where(old, h, tl.where(col == C, 1.0, y))         # the bias column
        tl.store(out_ptr + b * (context + frames) * OUT_C + o, y.to(out_ptr.dtype.element_ty), mask=live)


def _launch(history, x, table, bias, pad: int = 0):
    batch, frames, channels = x.shape
    context = 0 if history is None else history.shape[1]
    out = torch.empty(batch, context + frames, channels + pad, dtype=x.dtype, device=x.device)
    block = 2048
    _snake_kernel[(triton.cdiv((context + frames) * (channels + pad), block), batch)](
        out, x, x if history is None else history, table, x if bias is None else bias, frames, context,
        x.stride(0), x.stride(1), C=channels, OUT_C=channels + pad, HAS_BIAS=bias is not None, BLOCK=block,
        num_warps=4)
    return out


MAX_ROW_ELEMENTS = 1 << 30     # a batch row's output indexed in int32 (a streaming decode's rows are ~200 K)


def fits_snake(x, *_) -> bool:
    return x.stride(2) == 1 and x.shape[1] * max(x.shape[2] + 8, x.stride(1)) < MAX_ROW_ELEMENTS


def fits_snake_after(history, x, *_) -> bool:
    return fits_snake(x) and history.is_contiguous() and history.shape[1] * x.shape[2] < MAX_ROW_ELEMENTS


def snake(x, table, bias=None, pad: int = 0):
    return _launch(None, x, table, bias, pad)


def snake_after(history, x, table, bias=None):
    return _launch(history, x, table, bias)
