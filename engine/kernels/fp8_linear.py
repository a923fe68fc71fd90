"""FP8 weights for the decoder layers' projections at many rows (KernelSettings.weights="fp8"): e4m3 with a scale per
output channel, each row's activations quantized on the fly with a scale of its own (vLLM's dynamic fp8 scheme), the
product by torch._scaled_mm (into bf16, then the activations' dtype). Only the model's own projections are swapped
(not the aligner's, which shares the layer code), and the few-row kernels keep bf16: at a row or two a projection
reads its weights rather than computes."""
import weakref

import torch
import torch.nn.functional as F

E4M3 = torch.float8_e4m3fn
E4M3_MAX = torch.finfo(E4M3).max
SLOTS = {"attention_inputs": (2,), "attention_output_and_mlp": (2, 4, 5)}    # each op's weight arguments


def rows(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[n, k] -> (e4m3 [n, k] row-major, float32 scales [n, 1]): each row at its own scale."""
    scale = t.float().abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / E4M3_MAX
    return (t.float() / scale).to(E4M3).contiguous(), scale


def quantize(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[out, in] -> (e4m3 [out, in], float32 scales [1, out])."""
    w8, scale = rows(w)
    return w8, scale.t().contiguous()


def linear(x: torch.Tensor, w) -> torch.Tensor:
    """x @ w.T for a weight tensor or its quantize() pair; x [rows, in]."""
    if isinstance(w, torch.Tensor):
        return F.linear(x, w)
    (w8, w_scale), (x8, x_scale) = w, rows(x)                # x8 row-major, as _scaled_mm's first operand must be
    out_dtype = torch.bfloat16 if x.is_cuda else x.dtype     # CUDA's row-wise scales give bf16 only
    return torch._scaled_mm(x8, w8.t(), scale_a=x_scale, scale_b=w_scale, out_dtype=out_dtype).to(x.dtype)


class Fp8Weights:
    """The quantized pairs of the weights adopted, by tensor; an op's weights not adopted pass as they are."""

    def __init__(self):
        self.pairs: dict[int, tuple] = {}

    def adopt(self, weights) -> None:
        for w in weights:       # held weakly: an id reused by another tensor never matches; the copy goes with it
            self.pairs[id(w)] = (weakref.ref(w, lambda _, key=id(w): self.pairs.pop(key, None)), quantize(w.detach()))

    def wrap(self, op: str, fn):
        slots = SLOTS[op]

        def call(*args):
            args = list(args)
            for i in slots:
                kept = self.pairs.get(id(args[i]))
                if kept is not None and kept[0]() is args[i]:
                    args[i] = kept[1]
            return fn(*args)
        return call
