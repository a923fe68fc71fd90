"""Start-up work: each phase logs its seconds, graphs are captured only for batches the KV cache can admit, the
aligner shares the TTS model's tokenizer files, built once, and modules skip the random init their weights replace."""
import contextlib
import logging

import numpy as np
import pytest
import torch

from bench.startup_bench import phases
from engine import Engine, SamplingParams, SynthesisRequest
from engine.core import graphs
from engine.core.graphs import DECODE_MOST, StagedGraphs, buckets_up_to, decode_buckets_up_to
from engine.models import load_model
from engine.models.qwen3_tts.model import Codec, TTSModel
from engine.models.qwen3_tts.text_tokenizer import SHARED, TextTokenizer
from engine.models.weights import seed_weights, without_init


@pytest.fixture(scope="module")
def model():
    return load_model(dummy="tiny", device="cpu")


def logged_phases(caplog) -> dict:
    return {p["phase"]: p["seconds"] for p in phases("\n".join(r.getMessage() for r in caplog.records))}


def test_loading_logs_each_phase_with_its_seconds_as_the_bench_reads_them(caplog):
    caplog.set_level(logging.INFO, "qwen_tts_engine")
    Engine(load_model(dummy="tiny", device="cpu"), max_active=4)
    logged = logged_phases(caplog)
    assert {"weights", "tokenizer", "KV allocation"} <= set(logged), logged
    assert all(s >= 0 for s in logged.values())


def test_the_bench_reads_phase_names_seconds_and_details():
    log = ("12:00:01 INFO engine-core: start-up: graphs talk 12.5 s (62 graphs)\n"
           "12:00:02 INFO qwen_tts_gateway: start-up: engine core ready 80.0 s (dummy:1.7B-CustomVoice)\n"
           "12:00:03 INFO engine-core: KV cache: 50.2 GiB = ...\n")
    assert phases(log) == [dict(phase="graphs talk", seconds=12.5, detail="62 graphs"),
                           dict(phase="engine core ready", seconds=80.0, detail="dummy:1.7B-CustomVoice")]


def test_buckets_past_what_the_kv_cache_admits_are_not_captured(model, monkeypatch):
    """Every admitted stream reserves a block at least: 32 blocks admit 32 streams, whatever max_active says."""
    engine = Engine(model, max_active=64, kv_tokens_per_stream=8)      # 64 x 8 tokens = 32 blocks of 16
    admission, runner = engine.scheduler.admission, engine.runner
    reach = admission.kv_tokens // admission.block_size
    assert reach == 32
    for stage in (runner.predict_stage, runner.talk_stage, runner.first_stage, runner.decode_stage):
        assert stage.buckets[-1] == reach and stage.buckets == sorted(stage.buckets)
    captured = []
    monkeypatch.setattr(StagedGraphs, "capture", lambda stage, variant, bucket, like: captured.append((stage, bucket)))
    seconds, counts = runner.capture_all()
    assert max(bucket for stage, bucket in captured if stage is not runner.prefill_stage) == reach
    per_stage = len(runner.predict_stage.buckets)
    assert counts == dict(predict=2 * per_stage, talk=2 * per_stage, first=2 * per_stage,
                          decode=len(runner.decode_stage.buckets),
                          prefill=len(runner.prefill_stage.buckets))
    assert set(seconds) == set(counts)
    assert Engine(model, max_active=64, kv_tokens_per_stream=64).runner.predict_stage.buckets[-1] == 64


def test_the_codec_decoder_captures_a_coarser_ladder_that_pads_a_full_engine_little():
    """Each decode graph costs cuDNN's plans at capture: 12 of them at 1,024 streams, not the other stages' 29-30, and
    none more past 1,024 (a larger decode replays the 1,024 graph in slices); past 512 streams a batch's last slice
    pads by at most 25%, at most 2x past 64 (where a decode is cheap), to 64 below (about as fast)."""
    assert len(decode_buckets_up_to(1024)) == len(decode_buckets_up_to(2048)) == 12 and len(buckets_up_to(1024)) == 30
    for most in (100, 600, 1024, 2048):
        ladder = decode_buckets_up_to(most)
        assert ladder[-1] == min(most, DECODE_MOST) and ladder == sorted(set(ladder))
        for batch in range(1, most + 1):
            rest = batch - (batch - 1) // DECODE_MOST * DECODE_MOST
            bucket = next(b for b in ladder if b >= rest)
            assert bucket <= (1.25 * rest if rest > 512 else 2 * rest if rest > 64 else 64)


def test_graphs_have_no_bucket_of_one_so_dynamo_traces_no_size_one_layers():
    for most in (1, 2, 3, 100, 2048):
        for ladder, eager in ((buckets_up_to(most, graphs=True), buckets_up_to(most)),
                              (decode_buckets_up_to(most, True), decode_buckets_up_to(most))):
            assert ladder[0] == 2 and ladder == sorted(set(ladder))
            assert ladder[1:] == [b for b in eager if b > 2] and eager[0] == 1
    runner = Engine(load_model(dummy="tiny", device="cpu"), max_active=8).runner
    assert runner.predict_stage.buckets[0] == 1 and not runner.predict_stage.use_graphs     # eager: no padding


def test_only_the_first_of_batches_alike_runs_eagerly_before_its_capture(monkeypatch):
    """Past 32 rows, multiples of 16 run the compiled code the largest ran (the few-row kernels and Triton's
    specializations below); the codec decoder warms every bucket, since cuDNN plans each shape."""
    warmed = []
    monkeypatch.setattr(graphs, "capture_graph", lambda fn, inputs, pool=None, stream=None, warm=True: (
        warmed.append((len(inputs[0]), warm)) or (type("G", (), {"pool": lambda _: None})(), fn(*inputs))))
    ladder = [2, 8, 16, 24, 32, 48, 64, 100, 128, 256]
    for warm_each in (False, True):
        warmed.clear()
        stage = StagedGraphs(lambda _, rows: rows + 1, [0], ladder, use_graphs=True, warm_each=warm_each)
        for variant in ("a", "b"):
            for bucket in reversed(ladder):
                stage.capture(variant, bucket, [torch.zeros(0)])
        cold = {bucket for bucket, warm in warmed if not warm}
        assert cold == (set() if warm_each else {48, 64, 128}) and len(warmed) == 2 * len(ladder)


def test_small_codec_batches_take_cudnns_heuristic_and_large_ones_its_search():
    from engine.kernels.conv import heuristic_up_to
    seen = []
    conv = heuristic_up_to(512, lambda x, *_: seen.append(torch.backends.cudnn.benchmark) or x)
    with torch.backends.cudnn.flags(enabled=True, benchmark=True):
        for batch in (1, 512, 513, 2048):
            conv(torch.zeros(batch, 1, 1), None)
        assert torch.backends.cudnn.benchmark
    assert seen == [False, False, True, True]


def test_a_decode_past_its_largest_graph_replays_it_in_slices_each_copied_out_before_the_next():
    """The slices share one graph's output buffer: each is copied before the next replay overwrites it."""
    replays = []

    class Graph:
        def __init__(self, fn, inputs, out):
            self.fn, self.inputs, self.out = fn, inputs, out

        def replay(self):
            replays.append(int((self.inputs[0] != -1).sum()))
            self.out.copy_(self.fn(*self.inputs))

    def capture(fn, inputs, pool=None, stream=None, warm=True):
        out = fn(*inputs)
        return type("Captured", (Graph,), {"pool": lambda _: None})(fn, inputs, out), out

    stage = StagedGraphs(lambda _, rows: rows * 10, [-1], [1, 2, 4], use_graphs=True, split=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(graphs, "capture_graph", capture)
        rows = torch.arange(11)
        assert torch.equal(stage(None, rows), rows * 10)
    assert replays == [4, 4, 3] and sorted(stage.graphs) == [(4, None)]
    eager = StagedGraphs(lambda _, rows: rows * 10, [-1], [1, 2, 4], use_graphs=False, split=True)
    assert torch.equal(eager(None, rows), rows * 10)


def test_an_engine_decoding_in_slices_speaks_as_one_decoding_whole(monkeypatch):
    """Six streams, all in the first step, through a decode ladder that ends at 4 (as 2,048 through 1,024's): the
    same codes and PCM (to the CPU's float rounding, which varies with the batch's size)."""
    called = StagedGraphs.__call__
    batches = []
    monkeypatch.setattr(StagedGraphs, "__call__", lambda stage, variant, *inputs: (
        batches.append(len(inputs[0])) if stage.split else None) or called(stage, variant, *inputs))

    def speak():
        batches.clear()
        engine = Engine.load(dummy="tiny", device="cpu", max_active=6, kv_tokens_per_stream=128)
        texts = ["Hello there.", "A second stream, longer.", "Third.", "Four.", "Fifth one here.", "Six."]
        handles = [engine.submit(SynthesisRequest(text=t, sampling=SamplingParams.greedy(), max_frames=5,
                                                  ignore_eos=True)) for t in texts]
        engine.start()                                  # every stream joins the first step
        try:
            chunks = [list(h.iter_blocking()) for h in handles]
            return [np.concatenate([c.codes for c in cs]) for cs in chunks], \
                [np.concatenate([c.pcm for c in cs]) for cs in chunks], engine.runner.decode_stage.buckets, \
                list(batches)
        finally:
            engine.shutdown()

    codes, pcm, ladder, whole_batches = speak()
    monkeypatch.setattr(graphs, "DECODE_MOST", 4)
    sliced_codes, sliced_pcm, sliced_ladder, sliced_batches = speak()
    assert ladder[-1] == 6 and sliced_ladder[-1] == 4
    assert 6 in whole_batches and {6, 4, 2} <= set(sliced_batches)      # each 6 replayed as slices of 4 and 2
    assert all(np.array_equal(a, b) for a, b in zip(codes, sliced_codes))
    assert all(np.allclose(a, b, atol=1e-3) for a, b in zip(pcm, sliced_pcm))


def test_the_aligner_shares_the_tts_tokenizers_files_and_keeps_its_own_control_tokens():
    from aligner.align import PUBLISHED
    tts, aligner = TextTokenizer.load(), TextTokenizer.load(PUBLISHED)
    assert aligner._tok is tts._tok and aligner._merges is tts._merges
    assert "<non_speech>" in aligner.special_ids and "<non_speech>" not in tts.special_ids
    assert TextTokenizer.load()._control_tok is tts._control_tok is not aligner._control_tok
    assert aligner.decode([aligner.token_id("<non_speech>")]) == "<non_speech>"
    SHARED.clear()                                       # a fresh build gives the same ids
    text = "Hello, 世界! It's 3.14 <|im_end|> ok"
    assert TextTokenizer.load(PUBLISHED).encode(text) == aligner.encode(text)


def test_torch_compiles_share_is_reported_with_its_graphs_and_cache_hits(caplog):
    import torch
    from engine.core.startup import report_compiles
    caplog.set_level(logging.INFO, "qwen_tts_engine")
    double = torch.compile(lambda x: x * 2, dynamic=True, backend="eager")
    double(torch.ones(3))
    report_compiles()
    from torch._dynamo.utils import compilation_time_metrics
    [line] = [p for p in phases(caplog.text) if p["phase"].startswith("torch.compile")]
    assert line["seconds"] == round(sum(compilation_time_metrics["_compile.compile_inner"]), 1)
    assert "graphs; FX graph cache" in line["detail"]


def test_a_model_built_without_init_seeds_to_the_same_weights_and_the_init_comes_back(model):
    built = []
    for building in (contextlib.nullcontext, without_init):
        with building():
            tts, codec = TTSModel(model.cfg), Codec(model.cfg.codec)
        seed_weights(tts, 0), seed_weights(codec, 1), codec.decoder.quantizer.refresh()
        built.append({name: t for m in (tts, codec) for name, t in [*m.named_parameters(), *m.named_buffers()]})
    assert built[0].keys() == built[1].keys() and all(torch.equal(built[0][k], built[1][k]) for k in built[0])
    assert torch.nn.init.ones_(torch.zeros(2)).tolist() == [1.0, 1.0]
