"""The convolution shapes one codec decode runs through cuDNN, counted on the meta device: when cuDNN searches
(KernelSettings.conv_search), each is timed once a process, at the capture of the first graph that meets it, and
every decode graph (one a batch bucket) meets its own."""
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from engine.kernels.registry import TORCH, codec_conv_ops, ops
from engine.models.qwen3_tts.codec.decoder import CodecDecoder


class ConvShapes(TorchDispatchMode):

    def __init__(self):
        super().__init__()
        self.shapes: set[tuple] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.convolution.default:
            x, w, _, *params = args
            self.shapes.add((tuple(x.shape), tuple(w.shape), *(tuple(p) if isinstance(p, list) else p
                                                                for p in params)))
        return func(*args, **(kwargs or {}))


def decode_conv_shapes(codec: dict, batch: int, codec_conv: str, frames: int = 1) -> int:
    """Distinct cuDNN convolutions in one decode of `frames` frames for `batch` streams with that conv choice (out of
    inference mode, which shows this mode conv2d, not the aten.convolution that every conv reaches)."""
    kept = dict(vars(ops))
    vars(ops).update(TORCH, **codec_conv_ops(codec_conv, compiled=False))
    try:
        with torch.inference_mode(False), torch.device("meta"):
            decoder = CodecDecoder(codec, batch)
            codes = torch.zeros(batch, frames, decoder.num_quantizers, dtype=torch.int64)
            slots = torch.arange(batch)
        with torch.inference_mode(False), torch.no_grad(), ConvShapes() as seen:
            decoder.decode(codes, slots)
    finally:
        vars(ops).update(kept)
    return len(seen.shapes)
