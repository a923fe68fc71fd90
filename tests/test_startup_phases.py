"""Start-up work: each phase logs its seconds, graphs are captured only for batches the KV cache can admit, the
aligner shares the TTS model's tokenizer files, built once, and modules skip the random init their weights replace."""
import contextlib
import logging

import pytest
import torch

from bench.startup_bench import phases
from engine import Engine
from engine.core.graphs import StagedGraphs, buckets_up_to, decode_buckets_up_to
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
    """Each decode graph costs cuDNN's search at capture: 15 of them at 1,024 streams, not the other stages' 30; past
    512 streams a batch pads by at most 25%, at most 2x below (where a decode is cheap), to 16 below 16 (as fast)."""
    assert len(decode_buckets_up_to(1024)) == 15 and len(buckets_up_to(1024)) == 30
    for most in (100, 600, 1024, 2048):
        ladder = decode_buckets_up_to(most)
        assert ladder[-1] == most and ladder == sorted(set(ladder))
        for batch in range(1, most + 1):
            bucket = next(b for b in ladder if b >= batch)
            assert bucket <= (1.25 * batch if batch > 512 else 2 * batch if batch > 16 else 16)


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
    [line] = [p for p in phases(caplog.text) if p["phase"].startswith("torch.compile")]
    assert line["seconds"] > 0 and "graphs; FX graph cache" in line["detail"]


def test_a_model_built_without_init_seeds_to_the_same_weights_and_the_init_comes_back(model):
    built = []
    for building in (contextlib.nullcontext, without_init):
        with building():
            tts, codec = TTSModel(model.cfg), Codec(model.cfg.codec)
        seed_weights(tts, 0), seed_weights(codec, 1), codec.decoder.quantizer.refresh()
        built.append({name: t for m in (tts, codec) for name, t in [*m.named_parameters(), *m.named_buffers()]})
    assert built[0].keys() == built[1].keys() and all(torch.equal(built[0][k], built[1][k]) for k in built[0])
    assert torch.nn.init.ones_(torch.zeros(2)).tolist() == [1.0, 1.0]
