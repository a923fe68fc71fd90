"""dst[index] = src, one contiguous row per index: index_put is slow for long rows."""
import torch

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None

BLOCK = 1024

if triton is not None:
    @triton.jit
    def _write_rows_kernel(dst_ptr, src_ptr, index_ptr, row_len, src_stride, BLOCK: tl.constexpr):
        b = tl.program_id(0)
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        live = offs < row_len
        row = tl.load(index_ptr + b)
        values = tl.load(src_ptr + b.to(tl.int64) * src_stride + offs, mask=live)
        tl.store(dst_ptr + row * row_len + offs, values, mask=live)


def write_rows_torch(dst: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> None:
    dst[index] = src


def fits(dst, index, src) -> bool:
    return not src.shape[0] or src[0].is_contiguous() and src.dtype == dst.dtype


def write_rows(dst: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> None:
    if not src.shape[0]:
        return
    row_len = dst[0].numel()
    _write_rows_kernel[(src.shape[0], triton.cdiv(row_len, BLOCK))](dst, src, index, row_len, src.stride(0),
                                                                   BLOCK=BLOCK)
