"""A residual unit's tail in one Triton pass: x += SnakeBeta(h + h_bias) @ W^T + bias, in place. The activated rows
live only in registers (no pass of their own writes and rereads them), and the residual is the GEMM's accumulator.
Only for few channels (the decoder's last block), where the tail is a pass over memory; wider ones stay cuBLAS's."""
import torch

from engine.kernels import snake

triton = snake.triton
if triton is not None:
    import triton.language as tl

    _activate = snake._activate

    @triton.jit
    def _snake_residual_kernel(x_ptr, h_ptr, table_ptr, h_bias_ptr, w_ptr, bias_ptr, rows, frames,
                               K: tl.constexpr, N, x_batch_stride, x_time_stride, h_batch_stride, h_time_stride,
                               IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_K: tl.constexpr):
        r = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        n = tl.arange(0, BLOCK_N)
        live_r, live_n = r < rows, n < N
        b, t = r // frames, r % frames
        h_rows = h_ptr + (b * h_batch_stride + t * h_time_stride)[:, None]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            k = k0 + tl.arange(0, BLOCK_K)
            live_k = k < K
            a = tl.load(h_rows + k[None, :], mask=live_r[:, None] & live_k[None, :], other=0.0).to(tl.float32)
            a += tl.load(h_bias_ptr + k, mask=live_k, other=0.0).to(tl.float32)[None, :]
            a = _activate(a, tl.load(table_ptr + k, mask=live_k, other=0.0)[None, :],
                          tl.load(table_ptr + K + k, mask=live_k, other=0.0)[None, :])   # masked columns: 0
            w = tl.load(w_ptr + n[None, :] * K + k[:, None], mask=live_k[:, None] & live_n[None, :], other=0.0)
            acc = tl.dot(a.to(w.dtype), w, acc, input_precision="ieee" if IEEE else "tf32")
        acc += tl.load(bias_ptr + n, mask=live_n, other=0.0).to(tl.float32)[None, :]
        x_tile = x_ptr + (b * x_batch_stride + t * x_time_stride)[:, None] + n[None, :]
        live = live_r[:, None] & live_n[None, :]
        x = tl.load(x_tile, mask=live, other=0.0).to(tl.float32)
        tl.store(x_tile, (x + acc).to(x_ptr.dtype.element_ty), mask=live)


MAX_CHANNELS = 128       # at 192 channels cuBLAS and the SnakeBeta pass won (H200: 466 against 857 us)


def fits(x, h, table, h_bias, weight, bias) -> bool:
    return x.stride(2) == 1 and h.stride(2) == 1 and weight.is_contiguous() and \
        max(weight.shape) <= MAX_CHANNELS and weight.dtype == h.dtype


def snake_residual(x, h, table, h_bias, weight, bias):
    """x [B, T, N] (added to in place), h [B, T, K], weight [N, K]: all N in one tile (N <= MAX_CHANNELS)."""
    batch, frames, n = x.shape
    _snake_residual_kernel[(triton.cdiv(batch * frames, 64),)](
        x, h, table, h_bias, weight, bias, batch * frames, frames, h.shape[2], n, x.stride(0), x.stride(1),
        h.stride(0), h.stride(1), IEEE=x.dtype == torch.float32, BLOCK_M=64, BLOCK_N=triton.next_power_of_2(n),
        BLOCK_K=32, num_warps=4, num_stages=4)
    return x
