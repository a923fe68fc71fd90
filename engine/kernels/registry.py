"""Which implementation serves each op, chosen once at load by `select`; until then, the torch definitions."""
import logging
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace

import torch

from engine.kernels import (conv, dense_attention, few_row_layer, fp8_linear, layer_math, paged_attention,
                            ring_attention, row_copy, row_sampler, sampling, snake, snake_residual)

log = logging.getLogger("qwen_tts_engine")


def snake_then_gemm(x, h, table, h_bias, weight, bias):
    """A residual unit's tail unfused: the SnakeBeta op chosen (Triton, compiled or torch), then cuBLAS's GEMM."""
    return layer_math.snake_residual(x, h, table, h_bias, weight, bias, snake=ops.snake)


TORCH = dict(rms_norm=layer_math.rms_norm, attention_inputs=layer_math.attention_inputs,
             attention_output_and_mlp=layer_math.attention_output_and_mlp, snake=layer_math.snake,
             snake_after=layer_math.snake_after, snake_residual=snake_then_gemm,
             sample_rows=sampling.sample_rows,
             process_talker_logits=sampling.process_talker_logits,
             paged_attention=paged_attention.paged_attention_torch,
             dense_attention=dense_attention.dense_attention_torch,
             ring_attention=ring_attention.ring_attention_torch, write_rows=row_copy.write_rows_torch,
             conv=conv.conv_cudnn, trans_conv=conv.trans_conv_cudnn)
CODEC_CONVS = ("cudnn", "gemm")
KV_CACHES = {"auto": None, "fp8": torch.float8_e4m3fn}   # None: the model's dtype; fp8 unscaled, as vLLM's default
WEIGHTS = ("auto", "fp8")
COMPILED = ("rms_norm", "attention_inputs", "attention_output_and_mlp", "snake", "snake_after", "sample_rows",
            "process_talker_logits")

ops = SimpleNamespace(**TORCH)


@dataclass(frozen=True)
class KernelSettings:
    compile: bool = True
    triton: bool = True
    few_rows: int = few_row_layer.TILE_ROWS
    side_decode: bool = True
    conv_search: int = 10      # cuDNN algorithms timed per convolution shape at capture (0: its heuristic's pick)
    conv_search_past: int = 512    # the codec's batches up to this take the heuristic's pick (searched: ~0.5 s a graph)
    codec_conv: str = "cudnn"  # the codec decoder's convolutions: "cudnn", or "gemm" (cuBLAS matmuls, no search)
    kv_cache: str = "auto"     # the talker's KV cache: "auto" (the model's dtype) or "fp8" (half the bytes a token)
    weights: str = "auto"      # the decoder layers' projections past the few-row sizes: "auto" or "fp8" (per channel)


@dataclass(frozen=True)
class Kernels:
    choices: dict
    side_decode: bool
    kv_dtype: torch.dtype | None = None
    fp8_weights: fp8_linear.Fp8Weights | None = None     # the model's projections to adopt, once loaded

    def describe(self) -> str:
        return " ".join(f"{op}={how}" for op, how in self.choices.items()) + \
            f" decode={'side stream' if self.side_decode else 'in line'}" + \
            (f" kv={str(self.kv_dtype).removeprefix('torch.')}" if self.kv_dtype else "") + \
            (f" fp8 weights={len(self.fp8_weights.pairs)}" if self.fp8_weights else "")


def by_shape(fits, kernel, otherwise):
    def call(*args):
        return kernel(*args) if fits(*args) else otherwise(*args)
    return call


def codec_conv_ops(choice: str, compiled: bool) -> dict:
    """The codec decoder's conv ops for KernelSettings.codec_conv."""
    if choice == "cudnn":
        return {op: TORCH[op] for op in ("conv", "trans_conv")}
    depthwise = torch.compile(conv.depthwise, dynamic=True) if compiled else conv.depthwise
    return dict(conv=by_shape(conv.grouped, depthwise, conv.conv_matmul), trans_conv=conv.trans_conv_matmul)


def compile_for_every_size() -> None:
    """One compiled function serves several widths and strides. Sizes that happen to be equal stay distinct symbols:
    else a prefill of 2,048 tokens at hidden size 2,048 ties rows to width, and every other size retraces (an H200's
    load at --max-active 64 traced 14 graphs, each costing a start-up its trace)."""
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    torch._dynamo.config.accumulated_recompile_limit = max(torch._dynamo.config.accumulated_recompile_limit, 1024)
    from torch.fx.experimental import _config as shapes
    shapes.use_duck_shape = False


def select(device: torch.device, settings: KernelSettings = KernelSettings()) -> Kernels:
    if settings.codec_conv not in CODEC_CONVS:
        raise ValueError(f"codec_conv must be one of {CODEC_CONVS}, not {settings.codec_conv!r}")
    if settings.kv_cache not in KV_CACHES:
        raise ValueError(f"kv_cache must be one of {tuple(KV_CACHES)}, not {settings.kv_cache!r}")
    if settings.weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, not {settings.weights!r}")
    chosen, names = dict(TORCH), {op: "torch" for op in TORCH}
    gpu = device.type == "cuda"
    for choice, flag in ((settings.kv_cache, "--kv-cache-dtype"), (settings.weights, "--weights-dtype")):
        if gpu and choice == "fp8" and torch.cuda.get_device_capability(device) < (8, 9):
            raise ValueError(f"{flag} fp8 needs a GPU of compute capability 8.9 or newer (Ada, Hopper); "
                             f"{torch.cuda.get_device_name(device)} is {torch.cuda.get_device_capability(device)}: "
                             f"{flag} auto")
    cuda = gpu and few_row_layer.triton is not None

    def use(op, fn, name):
        chosen[op], names[op] = fn, name

    if cuda:
        use("write_rows", by_shape(row_copy.fits, row_copy.write_rows, row_copy.write_rows_torch), "triton|torch")
        if settings.triton:
            use("paged_attention", paged_attention.paged_attention, "triton")
            use("dense_attention", by_shape(dense_attention.fits, dense_attention.dense_attention,
                                            dense_attention.dense_attention_torch), "triton|torch")
            use("ring_attention", by_shape(ring_attention.fits, ring_attention.ring_attention,
                                           ring_attention.ring_attention_torch), "triton|torch")
    if gpu and settings.compile:
        compile_for_every_size()
        for op in COMPILED:
            use(op, torch.compile(TORCH[op], dynamic=True), "compiled")
    fp8 = fp8_linear.Fp8Weights() if settings.weights == "fp8" else None
    for op in fp8_linear.SLOTS if fp8 else ():       # before the few-row kernels: they keep the bf16 weights
        use(op, fp8.wrap(op, chosen[op]), f"{names[op]}+fp8")
    if gpu and settings.compile:
        if cuda:
            use("snake", by_shape(snake.fits_snake, snake.snake, chosen["snake"]), "triton|compiled")
            use("snake_after", by_shape(snake.fits_snake_after, snake.snake_after, chosen["snake_after"]),
                "triton|compiled")
            use("snake_residual", by_shape(snake_residual.fits, snake_residual.snake_residual,
                                           chosen["snake_residual"]), f"triton(<={snake_residual.MAX_CHANNELS} "
                "channels)|snake+cuBLAS")
        if cuda and settings.triton:
            use("sample_rows", by_shape(row_sampler.fits, row_sampler.sample_rows, chosen["sample_rows"]),
                f"triton(vocab<={row_sampler.MAX_VOCAB})|compiled")
        if cuda and settings.triton and settings.few_rows:
            rows = f"few_row(<={min(settings.few_rows, few_row_layer.TILE_ROWS)} rows)|{names['attention_inputs']}"
            use("attention_inputs", by_shape(partial(few_row_layer.fits_attention_inputs, settings.few_rows),
                                             few_row_layer.attention_inputs, chosen["attention_inputs"]), rows)
            use("attention_output_and_mlp", by_shape(partial(few_row_layer.fits_output_and_mlp, settings.few_rows),
                                                     few_row_layer.attention_output_and_mlp,
                                                     chosen["attention_output_and_mlp"]), rows)
    if settings.codec_conv == "gemm":
        chosen.update(codec_conv_ops("gemm", gpu and settings.compile))
        names.update(conv="depthwise|gemm", trans_conv="gemm")
    if gpu:
        torch.backends.cudnn.benchmark = settings.conv_search > 0
        torch.backends.cudnn.benchmark_limit = max(settings.conv_search, 1)
        past = settings.conv_search_past if settings.conv_search else 0
        search = (f"cudnn(heuristic<={past}|search {settings.conv_search})" if past else
                  f"cudnn(search {settings.conv_search})" if settings.conv_search else "cudnn(heuristic)")
        for op in ("conv", "trans_conv"):
            if names[op] == "torch":
                chosen[op], names[op] = conv.heuristic_up_to(past, chosen[op]) if past else chosen[op], search
    ops.__dict__.update(chosen)
    return Kernels(names, side_decode=gpu and settings.side_decode, kv_dtype=KV_CACHES[settings.kv_cache],
                   fp8_weights=fp8)
