"""Bad input fails at once with a code and a message a user can act on; the CLI works end to end."""
import time
import wave

import numpy as np
import pytest

from engine import Engine, EngineInputError, SamplingParams, SynthesisRequest, VoiceRef
from engine.models.weights import ModelLoadError
from gateway.cli import main as cli
from reference import cached_model_dir, official_generate


@pytest.fixture(scope="module")
def engines(engine):
    built = {v: Engine.load(dummy=v, device="cpu", max_active=2).start()
             for v in ("tiny-1.7B-Base", "tiny-0.6B-CustomVoice", "tiny-1.7B-VoiceDesign")}
    yield {"tiny": engine, **built}
    for e in built.values():
        e.shutdown()


@pytest.mark.parametrize("variant,request_kw,code,words", [
    ("tiny", dict(text="Hi", voice="nobody"), "unknown_voice", "vivian"),
    ("tiny", dict(text="Hi", language="klingon"), "unknown_language", "english"),
    ("tiny", dict(text="   "), "empty_text", "empty"),
    ("tiny", dict(text="x" * 6000), "text_too_long", "5000"),
    ("tiny", dict(text="Hi", instruct="x" * 6000), "text_too_long", "5000"),
    ("tiny", dict(text="Hi", non_streaming_text=True, text_complete=False), "invalid_request", "whole text"),
    ("tiny", dict(text="Hi", max_frames=0), "invalid_request", "max_frames"),
    ("tiny", dict(text="Hi", sampling=SamplingParams(top_k=2 ** 63)), "invalid_request", "top_k"),
    ("tiny", dict(text="Hi", sampling=SamplingParams(seed=2 ** 64)), "invalid_request", "seed"),
    ("tiny-1.7B-Base", dict(text="Hi"), "missing_reference", "reference audio"),
    ("tiny-1.7B-Base", dict(text="Hi", ref=VoiceRef(np.zeros(24000, np.float32), 24000)), "missing_reference",
     "transcript"),
    ("tiny-1.7B-Base", dict(text="Hi", voice="alice"), "unknown_voice", "registered"),
    ("tiny-1.7B-Base", dict(text="Hi", instruct="Be happy", ref=VoiceRef(np.zeros(24000, np.float32), 24000, "a")),
     "instruct_not_supported", "instruct"),
    ("tiny-0.6B-CustomVoice", dict(text="Hi", instruct="Be happy"), "instruct_not_supported", "0b6"),
    ("tiny-1.7B-VoiceDesign", dict(text="Hi", voice="vivian"), "unknown_voice", "voice description"),
])
def test_bad_request_is_rejected_with_a_clear_message(engines, variant, request_kw, code, words):
    with pytest.raises(EngineInputError) as err:
        engines[variant].submit(SynthesisRequest(**request_kw))
    assert err.value.code == code and words in str(err.value)
    assert engines[variant].num_active == 0


def test_append_of_too_much_text_is_rejected(engines):
    h = engines["tiny"].submit(SynthesisRequest(text="Hi", text_complete=False, max_frames=3))
    with pytest.raises(EngineInputError) as err:
        engines["tiny"].append_text(h.id, "y" * 6000)
    assert err.value.code == "text_too_long"
    engines["tiny"].cancel(h.id)
    assert list(h.iter_blocking())[-1].finish_reason == "cancelled"


def test_missing_model_names_the_path_and_the_dummy_alternative(tmp_path):
    with pytest.raises(ModelLoadError) as err:
        Engine.load(model=str(tmp_path / "nope"), device="cpu")
    assert "--dummy" in str(err.value) and "nope" in str(err.value)
    with pytest.raises(ModelLoadError) as err:
        Engine.load(model=str(tmp_path), device="cpu")
    assert "config.json" in str(err.value)
    (tmp_path / "config.json").write_text('{"model_type": "bark"}')
    with pytest.raises(ModelLoadError, match="model_type 'bark' is not served; served: qwen3_tts"):
        Engine.load(model=str(tmp_path), device="cpu")


@pytest.mark.slow                                   # parity with qwen-tts
@pytest.mark.parametrize("layout,non_streaming", [([], None), (["--streaming-text"], False)])
def test_cli_synth_matches_the_official_code(tmp_path, layout, non_streaming):
    """By default in the layout the official function defaults to (None: its own default argument)."""
    model_dir = cached_model_dir("1.7B-CustomVoice")
    text = "Good morning, this is the command line."
    off_codes, off_wav = official_generate(model_dir, "custom_voice", text, speaker="ryan", language="english",
                                           non_streaming=non_streaming, max_new_tokens=16)
    out, codes_out = tmp_path / "out.wav", tmp_path / "codes.npy"
    assert cli(["synth", "--model", str(model_dir), "--text", text, "--voice", "ryan", "--language", "english",
                "--greedy", "--max-frames", "15", "--out", str(out), "--codes-out", str(codes_out), *layout]) == 0
    np.testing.assert_array_equal(np.load(codes_out), off_codes)
    with wave.open(str(out)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (24000, 1, 2)
        pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2") / 32767.0
    assert pcm.shape == off_wav.shape and np.abs(pcm - off_wav).max() < 2e-4


def test_cli_reports_bad_input_without_a_traceback(tmp_path, capsys):
    assert cli(["synth", "--dummy", "tiny", "--text", "Hi", "--voice", "nobody", "--out", str(tmp_path / "x.wav")]) == 2
    assert "unknown voice 'nobody'" in capsys.readouterr().err


def test_unusable_reference_audio_fails_that_request_only(engines):
    engine = engines["tiny-1.7B-Base"]
    with pytest.raises(EngineInputError) as err:
        engine.submit(SynthesisRequest(text="Hi", ref=VoiceRef(np.zeros(10, np.float32), 24000, x_vector_only=True)))
    assert err.value.code == "invalid_audio"
    tone = (0.1 * np.sin(np.arange(24000) * 0.05)).astype(np.float32)
    good = engine.submit(SynthesisRequest(text="Hi there", ref=VoiceRef(tone, 24000, x_vector_only=True), max_frames=4))
    assert list(good.iter_blocking())[-1].final


@pytest.mark.slow                                   # an engine of its own, run to its end
def test_a_request_beyond_the_free_kv_cache_gets_busy_and_no_running_stream_is_cut():
    engine = Engine.load(dummy="tiny", device="cpu", max_active=2, kv_tokens_per_stream=48).start()   # 6 blocks of 16
    try:
        with pytest.raises(EngineInputError, match="KV tokens") as err:
            list(engine.submit(SynthesisRequest(text="Too long for any cache.", max_frames=200)).iter_blocking())
        assert err.value.code == "text_too_long"
        first = engine.submit(SynthesisRequest(text="A long one that keeps going.", max_frames=50, ignore_eos=True))
        second = engine.submit(SynthesisRequest(text="Another.", max_frames=50, ignore_eos=True))
        with pytest.raises(EngineInputError, match="KV cache is committed") as err:
            list(second.iter_blocking())
        assert err.value.code == "busy"
        assert sum(len(c.codes) for c in first.iter_blocking()) == 50
        again = engine.submit(SynthesisRequest(text="Next.", max_frames=50, ignore_eos=True))
        assert sum(len(c.codes) for c in again.iter_blocking()) == 50
        deadline = time.monotonic() + 30               # the final chunk goes out just before the stream's KV is freed
        while engine.scheduler.admission.reserved and time.monotonic() < deadline:
            time.sleep(0.01)
        assert engine.scheduler.admission.reserved == 0
    finally:
        engine.shutdown()


@pytest.mark.slow                                   # an engine of its own, run to its end
def test_a_stream_past_its_reservation_with_nothing_left_to_free_ends_alone(monkeypatch):
    monkeypatch.setattr("engine.core.admission.HORIZON_TOKENS", 16)        # reserves 16 of its frames
    engine = Engine.load(dummy="tiny", device="cpu", max_active=1, kv_tokens_per_stream=64).start()
    try:
        h = engine.submit(SynthesisRequest(text="Hello there, and on and on.", ignore_eos=True))   # 88 frames
        with pytest.raises(RuntimeError, match="KV cache is full"):
            _run_in_thread(lambda: list(h.iter_blocking()))
        nxt = engine.submit(SynthesisRequest(text="Next.", max_frames=4, ignore_eos=True))
        assert _run_in_thread(lambda: _outcome(nxt)) == 4
    finally:
        engine.shutdown()


def _run_in_thread(fn, timeout: float = 60.0):
    """fn() on a daemon thread; its result or exception, or TimeoutError if it hangs."""
    import threading
    box = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as exc:          # noqa: BLE001 - handed to the test
            box["error"] = exc
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise TimeoutError("hung")
    if "error" in box:
        raise box["error"]
    return box["result"]


def _outcome(handle):
    try:
        return sum(len(c.codes) for c in handle.iter_blocking())
    except Exception as exc:                  # noqa: BLE001
        return exc


def test_prompts_admitted_together_never_take_more_kv_blocks_than_are_free():
    # 6 blocks of 16 tokens; each stream reserves 3: both run, a third is busy until one ends
    engine = Engine.load(dummy="tiny", device="cpu", max_active=3, kv_tokens_per_stream=32)
    try:
        kw = dict(text="Hi", instruct="x " * 6, max_frames=4, ignore_eos=True)
        a, b, c = (engine.submit(SynthesisRequest(**kw)) for _ in range(3))
        engine.start()
        outcomes = [_run_in_thread(lambda: _outcome(h)) for h in (a, b, c)]
        assert outcomes[:2] == [4, 4] and outcomes[2].code == "busy"
    finally:
        engine.shutdown()


@pytest.mark.slow                                   # an engine of its own, run to its end
def test_a_prompt_larger_than_the_kv_cache_fails_instead_of_blocking_the_queue():
    # 3 blocks: a short prompt's own 2 and the block of its cached prefix (engine/core/prefix_cache.py)
    engine = Engine.load(dummy="tiny", device="cpu", max_active=1, kv_tokens_per_stream=48).start()
    try:
        big = engine.submit(SynthesisRequest(text="Hi", instruct="x " * 40, max_frames=4))
        with pytest.raises(EngineInputError) as err:
            _run_in_thread(lambda: list(big.iter_blocking()), timeout=30)
        assert err.value.code == "text_too_long"
        nxt = engine.submit(SynthesisRequest(text="Next.", max_frames=4, ignore_eos=True))
        assert _run_in_thread(lambda: _outcome(nxt), timeout=30) == 4
    finally:
        engine.shutdown()


@pytest.mark.slow                                   # a 9,000-token prompt on the CPU
def test_a_stream_reaching_the_context_limit_ends_and_the_others_go_on():
    from engine.core.runner import MAX_CONTEXT
    engine = Engine.load(dummy="tiny", device="cpu", max_active=2, kv_tokens_per_stream=8192, max_text_chars=20000)
    try:
        long = engine.submit(SynthesisRequest(text="Hi", instruct="x " * 9190, max_frames=40, ignore_eos=True))
        short = engine.submit(SynthesisRequest(text="Hello there.", max_frames=40, ignore_eos=True))
        engine.start()
        chunks = _run_in_thread(lambda: list(long.iter_blocking()))
        assert chunks[-1].finish_reason == "length"
        assert 0 < sum(len(c.codes) for c in chunks) < 40
        assert _run_in_thread(lambda: _outcome(short)) == 40
        assert all(len(s.kv.block_table) * 16 <= MAX_CONTEXT for s in engine.scheduler.running)
    finally:
        engine.shutdown()


def test_a_sampling_value_the_engine_cannot_hold_fails_that_request_only(engines):
    engine = engines["tiny"]
    other = engine.submit(SynthesisRequest(text="Hello there.", max_frames=6, ignore_eos=True))
    with pytest.raises(EngineInputError):
        engine.submit(SynthesisRequest(text="Hi", sampling=SamplingParams(top_k=2 ** 70)))
    assert _run_in_thread(lambda: _outcome(other)) == 6


@pytest.mark.slow                                   # a Base engine of its own
def test_an_abandoned_voice_registration_does_not_stop_the_engine_thread():
    engine = Engine.load(dummy="tiny-1.7B-Base", device="cpu", max_active=1)
    try:
        tone = (0.1 * np.sin(np.arange(24000) * 0.05)).astype(np.float32)
        future = engine.register_voice("gone", VoiceRef(tone, 24000, x_vector_only=True))
        assert future.cancel()                 # e.g. the HTTP client left while it waited
        engine.start()
        h = engine.submit(SynthesisRequest(text="Hi there", ref=VoiceRef(tone, 24000, x_vector_only=True),
                                           max_frames=3, ignore_eos=True))
        assert _run_in_thread(lambda: _outcome(h), timeout=30) == 3
        assert engine.thread.is_alive()
    finally:
        engine.shutdown()


def test_admission_refuses_beyond_the_slots_the_measured_capacity_and_the_kv_cache():
    from types import SimpleNamespace

    from engine.core.admission import Admission
    admission = Admission(3, kv_tokens=768, block_size=16, prompt_tokens=lambda seq, text_ids: 16, max_step_ms=64.0)
    prefix = SimpleNamespace(key="voice", length=20)           # its first block is shared: counted once
    seq = lambda frames: SimpleNamespace(request=SynthesisRequest("Hello", max_frames=frames),
                                         text=SimpleNamespace(num_text_ids=2, closed=True), reserved=0,
                                         prefix=prefix)
    a, b = seq(100), seq(100)
    admission.admit(a, active=0, step_ms=90.0)                 # an idle engine always admits
    admission.admit(b, active=1, step_ms=10.0)
    assert a.reserved == b.reserved == 128 - 16 and admission.reserved == 2 * 112 + 32
    with pytest.raises(EngineInputError, match="capacity") as err:    # the running streams fall behind real time
        admission.admit(seq(100), active=2, step_ms=90.0)
    assert err.value.code == "busy"
    with pytest.raises(EngineInputError, match="3 streams"):
        admission.admit(seq(100), active=3, step_ms=10.0)
    with pytest.raises(EngineInputError, match="committed"):
        admission.admit(seq(800), active=2, step_ms=10.0)
    admission.release(a)
    c = seq(800)
    admission.admit(c, active=1, step_ms=10.0)
    assert admission.refused == 3
    admission.release(b)
    admission.release(c)
    assert admission.reserved == 0 and not admission.prefixes
