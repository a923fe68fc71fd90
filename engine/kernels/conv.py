"""The codec decoder's convolutions over channels-last input [B, context + T, C] whose first `context` steps are the
carried history: through cuDNN (timed per shape when searching), or as cuBLAS matmuls (no per-shape search).

Weights are the modules' own, packed channels-last (decoder.pack): a conv's [C_out, C_in, k] is stored [C_out, k, C_in]
and a transposed conv's [C_in, C_out, k] as [C_in, k, C_out], so the matmuls read them as 2-D views without a copy."""
import torch
import torch.nn.functional as F


def as_nhwc(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(1, 2).unsqueeze(2)


def from_nhwc(y: torch.Tensor) -> torch.Tensor:
    return y.squeeze(2).transpose(1, 2)


def conv_cudnn(x, weight, bias, dilation: int, groups: int):
    """A dilated conv over a whole number of dilations runs undilated over its phases: step q * d + r is row q of
    column r, so the taps are consecutive rows (a view both ways, no copy). A conv to few outputs is a GEMM to its
    taps (conv_matmul)."""
    batch, steps, channels = x.shape
    if groups == 1 and weight.shape[0] < 8:         # the decoder's last conv: cuDNN took ~5x a pass over its input
        return conv_matmul(x, weight, bias, dilation, groups)
    if dilation == 1 or steps % dilation or not x.is_contiguous():
        return from_nhwc(F.conv2d(as_nhwc(x), weight[:, :, None], bias, dilation=(1, dilation), groups=groups))
    phases = x.view(batch, steps // dilation, dilation, channels).permute(0, 3, 1, 2)
    taps = weight.permute(0, 2, 1)[:, :, None].permute(0, 3, 1, 2)     # [C_out, C_in, k, 1], strides channels-last
    y = F.conv2d(phases, taps, bias, groups=groups)
    return y.permute(0, 2, 3, 1).reshape(batch, -1, y.shape[1])


def heuristic_up_to(rows: int, conv_op):
    """Batches up to `rows` take cuDNN's heuristic pick, untimed (a capture's search spared; small decodes have slack).
    Only the search is switched: cudnn.flags would reset the other settings too."""
    def call(x, *args):
        if x.shape[0] > rows:
            return conv_op(x, *args)
        searched, torch.backends.cudnn.benchmark = torch.backends.cudnn.benchmark, False
        try:
            return conv_op(x, *args)
        finally:
            torch.backends.cudnn.benchmark = searched
    return call


def trans_conv_cudnn(x, weight, bias, stride: int, context: int):
    """Trimmed so output i depends on inputs <= i: the outputs of the new steps only."""
    new = (x.shape[1] - context) * stride
    y = F.conv_transpose2d(as_nhwc(x), weight[:, :, None], bias, stride=(1, stride))
    return from_nhwc(y[..., context * stride:context * stride + new])


def grouped(x, weight, bias, dilation: int, groups: int) -> bool:
    return groups > 1


def depthwise(x, weight, bias, dilation: int, groups: int):
    """One channel a group: the k taps' products summed in float32 at least, as cuDNN accumulates."""
    k = weight.shape[-1]
    frames = x.shape[1] - (k - 1) * dilation
    acc = torch.promote_types(x.dtype, torch.float32)
    w = weight[:, 0].to(acc)
    y = sum(x[:, i * dilation:i * dilation + frames].to(acc) * w[:, i] for i in range(k))
    return (y if bias is None else y + bias.to(acc)).to(x.dtype)


def conv_matmul(x, weight, bias, dilation: int, groups: int):
    """One GEMM over the k dilated views side by side (im2col, K = k * C_in); where that copy would outweigh the
    output (C_in * T > C_out * (context + T): few output channels), one GEMM to k * C_out tap outputs over every step,
    then each output step sums its k taps' diagonal."""
    c_out, c_in, k = weight.shape
    batch, steps = x.shape[:2]
    span = (k - 1) * dilation
    frames = steps - span
    if k == 1:
        return F.linear(x, weight[:, :, 0], bias)
    if c_in * frames <= c_out * steps:
        views = x.unfold(1, span + 1, 1)[..., ::dilation].transpose(2, 3)        # [B, T, k, C_in]
        return F.linear(views.reshape(batch, frames, k * c_in), weight.permute(0, 2, 1).reshape(c_out, k * c_in),
                        bias)
    w = weight.permute(2, 0, 1).reshape(k * c_out, c_in)
    taps = F.linear(x, F.pad(w, (0, 0, 0, -len(w) % 8)))     # [B, steps, k * C_out]; 8-aligned rows for cuBLAS
    s_batch, s_step, s_col = taps.stride()         # the GEMM's own strides: its output need not be contiguous
    diagonal = taps.as_strided((batch, frames, c_out, k), (s_batch, s_step, s_col, dilation * s_step + c_out * s_col),
                               taps.storage_offset())
    y = diagonal.sum(-1)
    return y if bias is None else y + bias


def trans_conv_matmul(x, weight, bias, stride: int, context: int):
    """Output step q * stride + r takes input q - i through tap i * stride + r: one GEMM of the last `context + 1`
    inputs, channel-major and newest first ([C_in, taps]), to stride * C_out columns, whose rows interleave for free."""
    c_in, c_out, k = weight.shape
    taps = context + 1
    if k < taps * stride:
        weight = F.pad(weight, (0, taps * stride - k))
    batch, frames = x.shape[0], x.shape[1] - context
    window = x[..., None] if taps == 1 else \
        torch.stack([x[:, context - i:context - i + frames] for i in range(taps)], dim=-1)
    w = weight.permute(0, 2, 1).reshape(c_in * taps, stride * c_out)
    a = window.reshape(batch * frames, c_in * taps)
    y = a @ w if bias is None else torch.addmm(bias.repeat(stride), a, w)
    return y.view(batch, frames * stride, c_out)
