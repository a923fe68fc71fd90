"""The audio encoder's conv front end: log-mel chunks [n, mel, 100] -> [n, 13, d] (three 3x3 stride-2 convs with GELU,
the frames past a chunk's end zeroed after the first two, a linear over each time step's channels x mel bins).

Four ways to run it, one chosen per model at load (`Aligner.load(front_end=...)`, default `DEFAULT`):
- cudnn: the checkpoint's layout, NCHW convs over [n, 1, mel, time] (the official order of operations);
- channels_last: cuDNN's NHWC convs over the chunks transposed to [n, 1, time, mel] (each kernel transposed with them),
  so the last conv's [n, 13, mel/8, C] output is the linear's input without a copy (its weight reordered mel-major);
- gemm: the same layout, each conv one matmul over its im2col (the 9 shifted stride-2 views side by side); the first
  conv's masked rows and the zero border the next conv reads come out of its matmul as exact zeros (a bias column that
  is 0 there), and each GELU is applied while the next im2col is gathered;
- first_gemm (DEFAULT: on an H100 the front end of 256 chunks took 3.96 ms of kernels, against cudnn 8.61,
  channels_last 6.80, gemm 7.77): gemm's first conv (masked by its matmul), then channels_last's two."""
import torch
import torch.nn.functional as F

FRONT_ENDS = ("cudnn", "channels_last", "gemm", "first_gemm")
DEFAULT = "first_gemm"


def conv_out_len(n: int) -> int:
    return (n - 1) // 2 + 1


def valid(frames: torch.Tensor, length: int, dtype: torch.dtype) -> torch.Tensor:
    """[n, length]: 1 where a step is within its chunk's frames."""
    return (torch.arange(length, device=frames.device) < frames[:, None]).to(dtype)


def nhwc(x: torch.Tensor) -> torch.Tensor:
    """Channels-last strides even for one channel, where `contiguous(memory_format=...)` keeps NCHW's and so does
    the conv's output."""
    return x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)


def pack(encoder, front_end: str) -> tuple:
    """The weights `front_end` reads, laid out from the encoder's own."""
    if front_end not in FRONT_ENDS:
        raise ValueError(f"aligner front end must be one of {FRONT_ENDS}, not {front_end!r}")
    if front_end == "cudnn":
        return ()
    convs = (encoder.conv2d1, encoder.conv2d2, encoder.conv2d3)
    d, k = encoder.conv_out.weight.shape
    c = convs[-1].out_channels
    conv_out = encoder.conv_out.weight.detach().view(d, c, k // c).transpose(1, 2).reshape(d, k)
    taps = [conv.weight.detach().permute(0, 3, 2, 1).flatten(1) for conv in convs]     # [C_out, (time, mel, C_in)]
    first = torch.cat([taps[0], convs[0].bias.detach()[:, None]], 1)
    first = F.pad(first, (0, -first.shape[1] % 8))              # rows of 16-byte multiples: cuBLAS's tensor-core GEMMs
    kernels = [nhwc(conv.weight.detach().transpose(2, 3)) for conv in convs]
    return conv_out, dict(channels_last=kernels, gemm=[first, *taps[1:]], first_gemm=[first, *kernels[1:]])[front_end]


def cudnn(encoder, chunks: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
    x = chunks[:, None]
    for conv in (encoder.conv2d1, encoder.conv2d2):
        x = F.gelu(conv(x))
        frames = (frames + 1) // 2
        x = x * valid(frames, x.shape[-1], x.dtype)[:, None, None]
    x = F.gelu(encoder.conv2d3(x))
    return encoder.conv_out(x.permute(0, 3, 1, 2).flatten(2)) + encoder.positions.to(x.dtype)


def channels_last(encoder, chunks: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
    conv_out, (first, second, third) = encoder.front_weights
    frames = (frames + 1) // 2
    if encoder.front_end == "first_gemm":
        x = F.gelu(first_conv(chunks, frames, first, border=False)).permute(0, 3, 1, 2)
    else:
        x = F.gelu(F.conv2d(nhwc(chunks.transpose(1, 2)[:, None]), first, encoder.conv2d1.bias, 2, 1))
        x = x * valid(frames, x.shape[2], x.dtype)[:, None, :, None]
    x = F.gelu(F.conv2d(x, second, encoder.conv2d2.bias, 2, 1))
    x = x * valid((frames + 1) // 2, x.shape[2], x.dtype)[:, None, :, None]
    x = F.gelu(F.conv2d(x, third, encoder.conv2d3.bias, 2, 1))
    return F.linear(x.permute(0, 2, 3, 1).flatten(2), conv_out) + encoder.positions.to(x.dtype)


def gemm(encoder, chunks: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
    conv_out, (first, second, third) = encoder.front_weights
    frames = (frames + 1) // 2
    y = F.linear(gelu_im2col(first_conv(chunks, frames, first, border=True)), second, encoder.conv2d2.bias)
    y = y * valid((frames + 1) // 2, y.shape[1], y.dtype)[..., None, None]
    y = F.linear(gelu_im2col(padded(y)), third, encoder.conv2d3.bias)
    return F.linear(F.gelu(y).flatten(2), conv_out) + encoder.positions.to(y.dtype)


def first_conv(chunks: torch.Tensor, frames: torch.Tensor, weight: torch.Tensor, border: bool) -> torch.Tensor:
    """The first conv as one matmul over its 9 taps and a bias column that is 0 past `frames` (its output steps), so
    those rows come out as exact zeros: [n, t, m, C]; with `border`, also the zero border the next conv reads."""
    x = F.pad(chunks.transpose(1, 2), (1, 1, 1, 1))
    taps = x.unfold(1, 3, 2).unfold(2, 3, 2).flatten(3)                                  # [n, t, m, 9]
    cols = torch.cat([taps, torch.ones_like(taps[..., :1])], -1) * valid(frames, taps.shape[1], x.dtype)[..., None, None]
    extra = weight.shape[1] - cols.shape[-1]
    return F.linear(padded(cols, extra) if border else F.pad(cols, (0, extra)), weight)


def padded(y: torch.Tensor, extra_columns: int = 0) -> torch.Tensor:
    """[n, t, m, c] with the zero border a 3x3 stride-2 conv reads: a step before, and one after an even length."""
    t, m = y.shape[1:3]
    return F.pad(y, (0, extra_columns, 1, 2 * conv_out_len(m) - m, 1, 2 * conv_out_len(t) - t))


def gelu_im2col(y: torch.Tensor) -> torch.Tensor:
    """GELU of a padded [n, 2t + 1, 2m + 1, c] gathered as [n, t, m, 9c] (taps time-major): one pass."""
    view = y.unfold(1, 3, 2).unfold(2, 3, 2).permute(0, 1, 2, 4, 5, 3)
    cols = torch.empty(view.shape, dtype=y.dtype, device=y.device)
    torch.ops.aten.gelu.out(view, out=cols)     # F.gelu would order its output by the overlapping view's strides
    return cols.flatten(3)


RUN = dict(cudnn=cudnn, channels_last=channels_last, gemm=gemm, first_gemm=channels_last)
