"""The codec decoder's convolutions as matmuls (KernelSettings.codec_conv="gemm") against the cuDNN path (the default):
every conv call of the published decoder's decode, then whole streaming decodes, on identical random weights.

Tolerances: float64 is the same sum in another order (1e-10 of the output's scale); float32 1e-5 of it; bfloat16:
the matmul path's error against float64 is within 2x the cuDNN path's own plus 2^-8 of the scale."""
import pytest
import torch
import torch.nn.functional as F

from bench.conv_shapes import decode_conv_shapes
from engine.kernels.registry import KernelSettings, codec_conv_ops, ops, select
from engine.models.qwen3_tts.checkpoint import dummy_configs, tiny_codec_config
from engine.models.qwen3_tts.codec.decoder import CodecDecoder
from engine.models.weights import seed_weights

PUBLISHED = dummy_configs("1.7B-CustomVoice")[1]
GEMM, CUDNN = codec_conv_ops("gemm", compiled=False), codec_conv_ops("cudnn", compiled=False)


def reference(op: str, x, w, b, *args):
    """torch's own convolution (conv_cudnn sends a conv to few outputs to the GEMM path it is checked against)."""
    if op == "trans_conv":
        return CUDNN[op](x, w, b, *args)
    dilation, groups = args
    return F.conv1d(x.transpose(1, 2), w, b, dilation=dilation, groups=groups).transpose(1, 2)


def published_calls(frames: int) -> set[tuple]:
    """(op, input shape, weight shape, dilation or stride, groups or context) of every conv in one decode."""
    seen = set()

    def recorder(op):
        def call(x, weight, bias, *args):
            seen.add((op, tuple(x.shape), tuple(weight.shape), bias is not None, *args))
            return CUDNN[op](x, weight, bias, *args)
        return call
    kept = dict(vars(ops))
    vars(ops).update(conv=recorder("conv"), trans_conv=recorder("trans_conv"))
    try:
        with torch.device("meta"):
            decoder = CodecDecoder(PUBLISHED, 2)
            decoder.decode(torch.zeros(2, frames, 16, dtype=torch.int64), torch.arange(2))
    finally:
        vars(ops).update(kept)
    return seen


def channels_last(w: torch.Tensor) -> torch.Tensor:
    return w.permute(0, 2, 1).contiguous().permute(0, 2, 1)


@pytest.mark.parametrize("dilation", [3, 9])
@pytest.mark.parametrize("steps", [54 + 27, 54 + 25])          # whole dilations (over its phases) or not
def test_a_dilated_conv_over_its_phases_is_the_dilated_conv(dilation, steps):
    torch.manual_seed(0)
    x = torch.randn(3, steps + 2, 8, dtype=torch.float64)
    weight = channels_last(torch.randn(5, 8, 7, dtype=torch.float64))
    bias = torch.randn(5, dtype=torch.float64)
    for view in (x[:, :steps].contiguous(), x[:, 1:1 + steps], x[:1, :steps].contiguous()):
        want = torch.nn.functional.conv1d(view.transpose(1, 2), weight, bias, dilation=dilation).transpose(1, 2)
        got = CUDNN["conv"](view, weight, bias, dilation, 1)
        assert got.shape == want.shape and torch.allclose(got, want, atol=1e-10)


def layer_inputs(call: tuple, dtype: torch.dtype, seed: int):
    _, x_shape, w_shape, has_bias, *args = call
    g = torch.Generator().manual_seed(seed)
    fan_in = w_shape[1] * w_shape[2] if call[0] == "conv" else w_shape[0]
    x = torch.randn(x_shape, generator=g, dtype=torch.float64)
    w = channels_last(torch.randn(w_shape, generator=g, dtype=torch.float64) / fan_in ** 0.5)
    b = torch.randn(w_shape[0 if call[0] == "conv" else 1], generator=g, dtype=torch.float64) if has_bias else None
    return [t if t is None else t.to(dtype) for t in (x, w, b)], args


def test_the_published_decoder_runs_every_conv_kind():
    calls = published_calls(1) | published_calls(3)
    assert len({c for c in calls if c[0] == "trans_conv"}) == 12               # 2 upsampling + 4 blocks, 1 and 3 frames
    assert {c[-1] for c in calls if c[0] == "conv"} == {1, 1024}               # dense and depthwise (ConvNeXt)
    assert {c[-2] for c in calls if c[0] == "conv"} == {1, 3, 9}               # the residual units' dilations
    assert any(c[2][0] == 1 for c in calls)                                    # the output conv: taps, not im2col


@pytest.mark.parametrize("frames", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_every_published_conv_matches_cudnn(frames):
    for seed, call in enumerate(sorted(published_calls(frames))):
        op = call[0]
        (x, w, b), args = layer_inputs(call, torch.float64, seed)
        want = reference(op, x, w, b, *args)
        scale = want.abs().max()
        got = GEMM[op](x, w, b, *args)
        assert got.shape == want.shape and got.dtype == want.dtype, call
        torch.testing.assert_close(got, want, rtol=0, atol=1e-10 * scale, msg=str(call))
        (x32, w32, b32), _ = layer_inputs(call, torch.float32, seed)
        torch.testing.assert_close(GEMM[op](x32, w32, b32, *args), want.float(), rtol=0, atol=1e-5 * scale.item(),
                                   msg=str(call))
        (x16, w16, b16), _ = layer_inputs(call, torch.bfloat16, seed)
        cudnn_error = (reference(op, x16, w16, b16, *args).double() - want).abs().max()
        gemm_error = (GEMM[op](x16, w16, b16, *args).double() - want).abs().max()
        assert gemm_error <= 2 * cudnn_error + scale / 256, call


def test_gemm_leaves_cudnn_no_conv_shape_to_search():
    for frames in (1, 3):
        assert decode_conv_shapes(PUBLISHED, 8, "cudnn", frames) == 22          # the last conv is a GEMM
        assert decode_conv_shapes(PUBLISHED, 8, "gemm", frames) == 0


def decode_chunks(decoder, codes, slots, chunks, codec_conv: str) -> torch.Tensor:
    """PCM of codes [B, T, 16] decoded chunk after chunk, every conv continuing from its carried history."""
    select(torch.device("cpu"), KernelSettings(codec_conv=codec_conv))
    try:
        decoder.reset(slots)
        out, start = [], 0
        for size in chunks:
            out.append(decoder.decode(codes[:, start:start + size], slots))
            start += size
        return torch.cat(out, dim=1)
    finally:
        select(torch.device("cpu"))


def random_decoder(config: dict, dtype: torch.dtype) -> CodecDecoder:
    decoder = CodecDecoder(config, 4)
    seed_weights(decoder, 0)
    decoder.quantizer.refresh()
    decoder = decoder.to(dtype)
    decoder.allocate(4)
    decoder.pack()
    return decoder


def test_streaming_decode_gemm_equals_cudnn():
    """float64: the same audio; float32 and bfloat16: the matmuls' audio is as near float64's as cuDNN's (these random
    weights grow activations to ~100 before the output conv, so float32 alone moves the audio by ~1e-4)."""
    codes = torch.randint(0, 2048, (2, 14, 16), generator=torch.Generator().manual_seed(1))
    slots, chunks = torch.tensor([3, 1]), [1, 1, 4, 2, 1, 5]
    decoder = random_decoder(tiny_codec_config(), torch.float64)
    exact = decode_chunks(decoder, codes, slots, chunks, "cudnn")
    assert exact.shape == (2, 14 * decoder.samples_per_frame) and exact.abs().max() > 0.1
    torch.testing.assert_close(decode_chunks(decoder, codes, slots, chunks, "gemm"), exact, rtol=0, atol=1e-10)
    for dtype, bound in ((torch.float32, 1e-3), (torch.bfloat16, 0.25)):
        decoder = random_decoder(tiny_codec_config(), dtype)
        cudnn, gemm = (decode_chunks(decoder, codes, slots, chunks, c).double() for c in ("cudnn", "gemm"))
        cudnn_error, gemm_error = (cudnn - exact).abs().max(), (gemm - exact).abs().max()
        assert gemm_error <= max(2 * cudnn_error, bound / 100) and gemm_error < bound, (dtype, gemm_error, cudnn_error)


def published_size_pcm(codec_conv: str) -> float:
    codes = torch.randint(0, 2048, (1, 4, 16), generator=torch.Generator().manual_seed(2))
    slots, chunks = torch.tensor([2]), [1, 2, 1]
    return decode_chunks(random_decoder(PUBLISHED, torch.float64), codes, slots, chunks, codec_conv)


@pytest.mark.slow
def test_published_size_streaming_decode_gemm_equals_cudnn():
    want = published_size_pcm("cudnn")
    assert want.abs().max() > 0.01
    torch.testing.assert_close(published_size_pcm("gemm"), want, rtol=0, atol=1e-10)


@pytest.mark.parametrize("layout", ["transposed", "offset"])
def test_tap_outputs_read_through_the_gemms_own_strides(monkeypatch, layout):
    """The output conv's tap GEMM read back with as_strided: right whatever strides and offset the GEMM returns
    (cuBLAS may hand back a column-major result, a caching allocator a view into a larger block)."""
    call = next(c for c in published_calls(1) if c[0] == "conv" and c[2][0] == 1)
    (x, w, b), args = layer_inputs(call, torch.float64, 0)
    want = CUDNN["conv"](x, w, b, *args)
    linear = torch.nn.functional.linear

    def odd_linear(a, weight, bias=None):
        y = linear(a, weight, bias)
        if layout == "transposed":
            return y.transpose(0, 2).contiguous().transpose(0, 2)
        return torch.cat([torch.zeros(7, dtype=y.dtype), y.flatten()])[7:].view(y.shape)
    monkeypatch.setattr(torch.nn.functional, "linear", odd_linear)
    got = GEMM["conv"](x, w, b, *args)
    assert odd_linear(x, w[:, :, 0]).storage_offset() == (7 if layout == "offset" else 0)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-10 * want.abs().max())
