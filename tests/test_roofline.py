"""bench/roofline.py's counts against independent ones on tiny engines: torch's FLOP counter over each stage's CPU call,
the parameters of the modules each stage reads, the state buffers the engine allocates; and stage_bench at 2,048."""
import json

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from bench import stage_bench
from bench.roofline import Cost, reached, stage_costs
from bench.roofline_report import codec_state_bytes, memory_plan
from engine import Engine
from engine.kernels.layer_math import BIAS_PAD
from engine.kernels.registry import ops
from engine.models.qwen3_tts.codec.decoder import ResidualUnit

BATCH = 4               # a graph bucket: a batch between two runs padded to the next
CONTEXT = 48            # whole 16-token blocks: the CPU's attention reads whole blocks, as counted


@pytest.fixture(scope="module", params=["tiny", "tiny-0.6B-CustomVoice"])     # 0.6B: no projection to the predictor
def tiny(request):
    engine = Engine.load(dummy=request.param, device="cpu", max_active=4, kv_tokens_per_stream=CONTEXT)
    model = engine.model
    return engine, model, stage_costs(model.cfg, model.cfg.codec, BATCH, CONTEXT, model.dtype.itemsize)


def numel(*modules) -> int:
    return sum(p.numel() for m in modules for p in m.parameters())


@torch.inference_mode()
def test_flops_match_torch_flop_counter(tiny):
    engine, _, costs = tiny
    for name, call in stage_bench.stage_calls(engine.runner, BATCH, CONTEXT).items():
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:    # attention as counted matmuls
            call()
        assert counter.get_total_flops() == costs[name].flops, name


def test_weight_bytes_are_the_parameters_each_stage_reads(tiny):
    _, model, costs = tiny
    cfg, talker, item = model.cfg, model.tts.talker, model.dtype.itemsize
    predictor, decoder = talker.code_predictor, model.codec.decoder
    rows = lambda width, gathers=1: gathers * BATCH * width * item                  # embedding rows gathered
    assert costs["talk"].weights == item * numel(talker.model.layers, talker.model.norm, talker.text_projection,
                                                 talker.codec_head) + rows(cfg.text_hidden_size)
    passes = cfg.num_code_groups - 1                                                # a prefill, then one per code
    assert costs["predict"].weights == item * (
        passes * numel(predictor.model.layers, predictor.model.norm, predictor.small_to_mtp_projection)
        + numel(predictor.lm_head)) + rows(cfg.talker.hidden_size, 1 + (passes - 1) + cfg.num_code_groups)
    unused = numel(decoder.quantizer.rvq_first.input_proj, decoder.quantizer.rvq_rest.input_proj)
    zero_rows = sum((BIAS_PAD - 1) * unit.conv2.conv.out_channels for unit in decoder.modules()
                    if isinstance(unit, ResidualUnit))                      # read by each 1x1 conv's GEMM
    zero_rows += decoder.decoder[-1].conv.in_channels                   # the last conv's 7 tap rows padded to 8
    assert costs["decode"].weights == item * (numel(decoder) - unused + zero_rows) + \
        rows(decoder.quantizer.table.shape[-1], decoder.num_quantizers)


@torch.inference_mode()
def test_predictor_cache_bytes_are_what_its_attention_reads(tiny, monkeypatch):
    engine, _, costs = tiny
    read = []
    attend = ops.dense_attention

    def counted(q, k, v, cache_k, cache_v, start, scale):
        end = start + q.shape[0] // cache_k.shape[0]
        read.append(2 * cache_k[:, :end].numel() * cache_k.element_size())
        return attend(q, k, v, cache_k, cache_v, start, scale)
    monkeypatch.setattr(ops, "dense_attention", counted)
    stage_bench.stage_calls(engine.runner, BATCH, CONTEXT)["predict"]()
    assert sum(read) == costs["predict"].state


def test_state_bytes_are_the_engine_buffers(tiny):
    engine, model, costs = tiny
    kv = engine.runner.kv
    token = 2 * kv.k[:, 0].numel() * kv.k.element_size()
    assert costs["talk"].state == BATCH * CONTEXT * token                           # the new token's is written
    per_slot = 0
    for m in model.codec.decoder.modules():
        for name in getattr(m, "state_specs", {}):
            size = getattr(m, name)[0].numel() * getattr(m, name).element_size()
            per_slot += size if name in ("keys", "values") else 2 * size      # the window ring: read once
    assert costs["decode"].state == BATCH * per_slot
    assert codec_state_bytes(model.cfg.codec, model.dtype.itemsize) == sum(
        getattr(m, name)[0].numel() * getattr(m, name).element_size()
        for m in model.codec.decoder.modules() for name in getattr(m, "state_specs", {}))
    plan = memory_plan(model.cfg, 2048, CONTEXT, kv.block_size, model.dtype.itemsize)
    assert plan["kv_gib"] * (1 << 30) == pytest.approx(2048 * CONTEXT * token)


def test_reached_shares_and_floor():
    compute = Cost(flops=989e9 * 2, weights=3.35e9)            # 2 ms of math, 1 ms of traffic at H100 limits
    r = reached(compute, 4.0)
    assert (r["tflops"], r["tflops_share"], r["floor_ms"], r["bound"]) == pytest.approx((494.5, 0.5, 2.0, "compute"))
    assert r["tbps_share"] == pytest.approx(0.25)
    memory = reached(Cost(flops=1e9, state=6.7e9), 2.0, peak_tflops=100, peak_tbps=6.7)
    assert (memory["tbps"], memory["tbps_share"], memory["floor_ms"], memory["bound"]) == pytest.approx(
        (3.35, 0.5, 1.0, "memory"))


@pytest.mark.slow
def test_stage_bench_runs_2048_streams(tmp_path):
    """Nothing caps the engine's stages at 1,024 streams: buckets, slots, KV tables and codec state take 2,048."""
    path = tmp_path / "stages.json"
    stage_bench.main(["--dummy", "tiny", "--batches", "2048", "--reps", "1", "--context", "160", "--json", str(path)])
    out = json.loads(path.read_text())
    (row,) = out["batches"]
    assert row["batch"] == 2048 and out["memory"]["streams"] == 2048 and out["context"] == 160
    for name in ("predict", "talk", "decode"):
        assert row[name]["ms"] > 0 and row[name]["gflop"] > 0
    assert row["step"]["gflop"] == pytest.approx(sum(row[n]["gflop"] for n in ("predict", "talk", "decode")))


@pytest.mark.slow
def test_stage_bench_compares_the_codec_conv_choices(tmp_path):
    """--codec-conv cudnn gemm: one run times the decode with each, and counts the conv shapes cuDNN would search."""
    path = tmp_path / "stages.json"
    stage_bench.main(["--dummy", "tiny", "--batches", "4", "--reps", "1", "--context", "48", "--max-active", "8",
                      "--codec-conv", "cudnn", "gemm", "--json", str(path)])
    out = json.loads(path.read_text())
    by = out["by_codec_conv"]
    assert out["codec_conv"] == "cudnn" and set(by) == {"cudnn", "gemm"}
    assert by["cudnn"]["cudnn_conv_shapes"] == {"4": 19} and by["gemm"]["cudnn_conv_shapes"] == {"4": 0}
    for result in by.values():
        (row,) = result["batches"]
        assert row["decode"]["ms"] > 0 and row["decode"]["gflop"] == out["batches"][0]["decode"]["gflop"]
