"""The talker's KV cache in fp8 (KernelSettings.kv_cache, `serve --kv-cache-dtype fp8`): written rounded, read back in
the queries' dtype, a quarter of a float32 cache's bytes a token; its attention stays close to a full cache's. The
Triton kernel's fp8 path is bench/gpu_check.py's (Triton's interpreter cannot run the paged kernel)."""
import numpy as np
import pytest
import torch

from engine import Engine, SamplingParams, SynthesisRequest
from engine.core.memory import block_bytes
from engine.kernels import paged_attention as pa
from engine.kernels.registry import KernelSettings, select

FP8 = torch.float8_e4m3fn


def test_attention_over_an_fp8_cache_stays_close_to_a_full_one():
    torch.manual_seed(0)
    b, heads, kv_heads, d, bs = 6, 8, 2, 64, 16
    lens, blocks = torch.tensor([1, 16, 17, 40, 63, 5]), torch.randperm(b * 4).view(b, 4)
    k, v = torch.randn(b * 4 * bs, kv_heads, d), torch.randn(b * 4 * bs, kv_heads, d)
    caches = {dtype: [torch.zeros(b * 4 * bs, kv_heads, d, dtype=dtype) for _ in range(2)] for dtype in (torch.float32, FP8)}
    for kc, vc in caches.values():
        pa.write(kc, vc, (k, v, torch.arange(len(k))))
    assert torch.equal(caches[FP8][0].float(), k.to(FP8).float())        # rounded to fp8 as written
    q = torch.randn(b, heads, d)
    new = (torch.randn(b, kv_heads, d), torch.randn(b, kv_heads, d), blocks[:, 3] * bs + 2)   # a decode row's own
    full, rounded = (pa.paged_attention_torch(q, *caches[dtype], blocks, lens, d ** -0.5, bs, new)
                     for dtype in (torch.float32, FP8))
    assert rounded.dtype == torch.float32 and 0 < ((rounded - full).norm() / full.norm()).item() < 0.05
    assert torch.equal(caches[FP8][1][new[2]].float(), new[1].to(FP8).float())
    kc, vc = caches[FP8]                                        # past fp8's range: saturated, never NaN
    pa.write(kc, vc, (torch.full((1, kv_heads, d), 1e4), torch.full((1, kv_heads, d), -1e4), torch.tensor([0])))
    assert kc[0].float().eq(448).all() and vc[0].float().eq(-448).all()


def test_an_engine_with_an_fp8_cache_speaks_from_a_quarter_of_the_bytes():
    engines = {cache: Engine.load(dummy="tiny", device="cpu", max_active=2, kv_tokens_per_stream=256,
                                  kernels=KernelSettings(kv_cache=cache)).start() for cache in ("auto", "fp8")}
    try:
        assert engines["fp8"].runner.kv.k.dtype == FP8 and "kv=float8_e4m3fn" in select(
            torch.device("cpu"), KernelSettings(kv_cache="fp8")).describe()
        assert block_bytes(engines["auto"].runner) == 4 * block_bytes(engines["fp8"].runner)     # float32 model
        request = SynthesisRequest(text="Hello there, how are you?", sampling=SamplingParams.greedy(), max_frames=6)
        chunks = list(engines["fp8"].submit(request).iter_blocking())
        audio = np.concatenate([c.pcm for c in chunks])
        assert len(audio) == 6 * 1920 and np.isfinite(audio).all()
    finally:
        for engine in engines.values():
            engine.shutdown()


def test_serve_passes_the_cache_dtype_to_the_engine_and_refuses_an_unknown_one():
    from gateway.cli import build_parser
    from gateway.engine_process.spec import EngineSpec
    args = build_parser()[0].parse_args(["serve", "--dummy", "tiny", "--kv-cache-dtype", "fp8"])
    assert args.kv_cache_dtype == "fp8"
    engine, _ = EngineSpec(dummy="tiny", device="cpu", max_active=2, kv_cache_dtype=args.kv_cache_dtype).build()
    try:
        assert engine.runner.kv.k.dtype == FP8
    finally:
        engine.shutdown()
    with pytest.raises(ValueError, match="kv_cache must be one of"):
        select(torch.device("cpu"), KernelSettings(kv_cache="fp4"))


def test_a_gpu_older_than_ada_is_told_to_keep_the_models_dtype(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-80GB")
    with pytest.raises(ValueError, match="compute capability 8.9 or newer.*A100.*--kv-cache-dtype auto"):
        select(torch.device("cuda"), KernelSettings(kv_cache="fp8"))


def test_serve_sizes_its_default_batch_by_the_gpu_memory(monkeypatch):
    from types import SimpleNamespace

    from gateway.engine_process.spec import default_max_active
    assert default_max_active(torch.device("cpu")) == 32
    for gib, streams in ((141, 2048), (80, 2048), (48, 1024), (24, 1024)):
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d, g=gib: SimpleNamespace(total_memory=g << 30))
        assert default_max_active(torch.device("cuda")) == streams
