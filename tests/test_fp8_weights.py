"""The decoder layers' projections in fp8 (KernelSettings.weights, `serve --weights-dtype fp8`): e4m3 weights with a
scale per output channel, activations quantized per row; exact where both are representable, close to the full
product otherwise; only the model's own layers are swapped, never the aligner's. Its error on a GPU, and its speed,
are bench/gpu_check.py's and stage_bench.py's to measure."""
import numpy as np
import pytest
import torch

from engine import Engine, SamplingParams, SynthesisRequest
from engine.kernels import fp8_linear, layer_math
from engine.kernels.registry import KernelSettings, select


def test_a_product_of_representable_values_is_exact():
    w = torch.tensor([[1.0, -0.5, 0.0, 0.25], [2.0, 1.0, -1.0, 0.5]]).repeat(4, 4)         # [8, 16]
    x = torch.tensor([[2.0, -1.0, 0.5, 1.0]]).repeat(3, 4) * torch.tensor([[1.0], [-4.0], [0.125]])
    for dtype in (torch.float32, torch.bfloat16):
        out = fp8_linear.linear(x.to(dtype), fp8_linear.quantize(w.to(dtype)))
        assert out.dtype == dtype and torch.equal(out.float(), (x @ w.t()).to(dtype).float())


def test_a_product_of_random_values_stays_close_and_saturates_nothing():
    torch.manual_seed(0)
    w, x = 0.05 * torch.randn(96, 256), 3 * torch.randn(64, 256)
    x[5, 7] = 1e4                                                  # an outlier row keeps its own scale
    full, rounded = x @ w.t(), fp8_linear.linear(x, fp8_linear.quantize(w))
    error = (rounded - full).norm(dim=1) / full.norm(dim=1)
    assert error.max() < 0.08 and error.median() < 0.05 and torch.isfinite(rounded).all()
    column_major = x.t().contiguous().t()                           # rows need not be contiguous
    assert torch.equal(fp8_linear.linear(column_major, fp8_linear.quantize(w)), rounded)


def test_only_the_adopted_weights_are_swapped_so_the_aligners_layers_keep_theirs():
    torch.manual_seed(0)
    n, hidden, inter = 5, 32, 64
    x, attn = torch.randn(n, hidden), torch.randn(n, hidden)
    wo, norm_w, w_gate_up, w_down = (torch.randn(hidden, hidden) / 8, torch.ones(hidden),
                                     torch.randn(2 * inter, hidden) / 8, torch.randn(hidden, inter) / 8)
    fp8 = fp8_linear.Fp8Weights()
    op = fp8.wrap("attention_output_and_mlp", layer_math.attention_output_and_mlp)
    full = layer_math.attention_output_and_mlp(x, attn, wo, norm_w, w_gate_up, w_down, 1e-6)
    assert torch.equal(op(x, attn, wo, norm_w, w_gate_up, w_down, 1e-6), full)        # not adopted: as it was
    fp8.adopt([wo, w_gate_up, w_down])
    rounded = op(x, attn, wo, norm_w, w_gate_up, w_down, 1e-6)
    assert not torch.equal(rounded, full) and ((rounded - full).norm() / full.norm()).item() < 0.05
    assert torch.equal(op(x, attn, wo.clone(), norm_w, w_gate_up, w_down, 1e-6),       # another tensor: its own
                       layer_math.attention_output_and_mlp(x, attn, wo.clone(), norm_w, fp8.pairs[id(w_gate_up)][1],
                                                           fp8.pairs[id(w_down)][1], 1e-6))


def test_an_engine_with_fp8_weights_runs_every_projection_in_fp8_and_speaks(monkeypatch):
    shapes, scaled_mm = set(), torch._scaled_mm
    monkeypatch.setattr(torch, "_scaled_mm", lambda a, b, **kw: shapes.add(tuple(b.t().shape)) or scaled_mm(a, b, **kw))
    engine = Engine.load(dummy="tiny", device="cpu", max_active=2, kv_tokens_per_stream=256,
                         kernels=KernelSettings(weights="fp8")).start()
    try:
        request = SynthesisRequest(text="Hello there, how are you?", sampling=SamplingParams.greedy(), max_frames=6)
        audio = np.concatenate([c.pcm for c in engine.submit(request).iter_blocking()])
        assert len(audio) == 6 * 1920 and np.isfinite(audio).all()
        assert shapes == {tuple(w.shape) for w in engine.model.projection_weights}    # the talker's and predictor's
    finally:
        engine.shutdown()


def test_serve_passes_the_weights_dtype_and_an_old_gpu_is_told_to_keep_the_models(monkeypatch):
    from gateway.cli import build_parser
    from gateway.engine_process.spec import EngineSpec
    args = build_parser()[0].parse_args(["serve", "--dummy", "tiny", "--weights-dtype", "fp8"])
    engine, _ = EngineSpec(dummy="tiny", device="cpu", max_active=2, weights_dtype=args.weights_dtype).build()
    engine.shutdown()
    with pytest.raises(ValueError, match="weights must be one of"):
        select(torch.device("cpu"), KernelSettings(weights="int4"))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-80GB")
    with pytest.raises(ValueError, match="--weights-dtype fp8 needs .*8.9 or newer.*A100.*--weights-dtype auto"):
        select(torch.device("cuda"), KernelSettings(weights="fp8"))


def test_a_weight_freed_takes_its_fp8_copy_with_it():
    fp8, w = fp8_linear.Fp8Weights(), torch.randn(16, 16)
    fp8.adopt([w])
    assert len(fp8.pairs) == 1
    del w
    assert not fp8.pairs
