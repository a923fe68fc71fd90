"""The voice registry against hostile input: one name rule everywhere, a store that opens nothing outside its folder,
one cap for memory and disk with its eviction, reference audio bounded from its WAV header, registrations that run
beside the engine thread (never in it) from a bounded queue."""
import os
import threading

import numpy as np
import pytest
import torch

from engine import Engine, EngineInputError, SamplingParams, SynthesisRequest, VoiceRef
from engine.api import voice_input
from engine.api.voice_input import read_reference_wav
from engine.models.qwen3_tts.prompt import Voice
from engine.models.qwen3_tts.voice_store import VoiceStore
from wav_headers import wav_bytes

BAD_NAMES = ["../outside/evil", "/etc/passwd", "a\x00b", "x" * 65, ".", "..", ".hidden", "", "a/b", "a b", "é"]


def tone(seconds: float, rate: int = 24000, hz: float = 180) -> np.ndarray:
    return (0.3 * np.sin(2 * np.pi * hz * np.arange(int(seconds * rate)) / rate)).astype(np.float32)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    root = tmp_path_factory.mktemp("voices")
    outside = root / "outside"
    outside.mkdir()
    torch.save({}, outside / "evil.safetensors")           # what a path in a name would reach
    engine = Engine.load(dummy="tiny-0.6B-Base", device="cpu", max_active=2, voices_dir=str(root / "store"),
                         max_voices=3).start()
    yield engine
    engine.shutdown()


def test_no_bad_name_reaches_a_file_or_raises_anything_but_a_clear_error(engine):
    engine.register_voice("ok", VoiceRef(tone(1), 24000, x_vector_only=True)).result(60)
    store = engine.voices.store
    for name in BAD_NAMES:
        assert store.file(name) is None and store.version(name) is None and store.load(name, "cpu") is None
        assert name not in engine.voices and not engine.delete_voice(name) and engine.voices.get(name) is None
        with pytest.raises(EngineInputError) as bad:
            engine.register_voice(name, VoiceRef(tone(1), 24000, x_vector_only=True))
        assert bad.value.code == "invalid_request" and "voice name" in str(bad.value)
        with pytest.raises(EngineInputError) as unknown:
            engine.submit(SynthesisRequest(text="Hi.", voice=name))
        assert unknown.value.code == "unknown_voice" and len(str(unknown.value)) < 200
        with pytest.raises(ValueError):
            store.save(name, Voice(xvector=torch.zeros(4)))
    assert sorted(os.listdir(store.path)) == ["ok.safetensors"]


def test_an_unknown_voice_error_names_the_voice_not_the_registry(engine):
    with pytest.raises(EngineInputError, match="no registered voice 'nobody': GET /v1/voices lists them$"):
        engine.submit(SynthesisRequest(text="Hi.", voice="nobody"))


def test_the_cap_holds_in_memory_and_on_disk_dropping_the_least_recently_used(engine):
    for name in ("v1", "v2", "v3"):
        engine.register_voice(name, VoiceRef(tone(1), 24000, x_vector_only=True)).result(60)
    engine.voices.store.touch("v1")                  # used since: v2 is now the least recently used
    engine.register_voice("v4", VoiceRef(tone(1), 24000, x_vector_only=True)).result(60)
    assert engine.voice_names() == ["v1", "v3", "v4"]
    assert sorted(os.listdir(engine.voices.store.path)) == ["v1.safetensors", "v3.safetensors", "v4.safetensors"]
    assert len(engine.voices._voices) <= 3
    reopened = VoiceStore(engine.voices.store.path, capacity=2)            # a lower cap holds from the start
    assert len(reopened.names()) == 2 and "v4" in reopened.names()


def test_the_listing_is_read_again_only_when_the_folder_changes(tmp_path, monkeypatch):
    store = VoiceStore(tmp_path)
    store.save("a", Voice(xvector=torch.zeros(4)))
    os.utime(tmp_path, ns=(0, 10 ** 18))                  # settled long ago
    listings = []
    listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda path: listings.append(path) or listdir(path))
    assert store.names() == ["a"] and store.names() == ["a"] and len(listings) == 1
    store.save("b", Voice(xvector=torch.zeros(4)))
    assert store.names() == ["a", "b"]


@pytest.mark.parametrize("data, problem", [
    (wav_bytes(3_000_001, 1), "sample rate"), (wav_bytes(4_294_967_295, 10), "sample rate"),
    (wav_bytes(24000, 769), "must last"), (wav_bytes(8000, 60 * 8000 + 1), "must last"),
    (wav_bytes(24000, 24000, channels=3), "mono or stereo"), (wav_bytes(24000, 24000, width=3), "bits"),
    (wav_bytes(24000, 100, claimed=24000), "must last"),                  # it claims 1 s and holds 100 samples
    (b"RIFF\xff\xff\xff\xffWAVEfmt ", "not a PCM WAV"), (b"", "not a PCM WAV"), (os.urandom(64), "not a PCM WAV"),
])
def test_a_reference_is_refused_from_its_header_before_its_samples_are_decoded(data, problem):
    with pytest.raises(EngineInputError, match=problem) as refused:
        read_reference_wav(data)
    assert refused.value.code == "invalid_audio"


def test_every_allowed_rate_width_and_channel_count_reads():
    for rate in voice_input.REFERENCE_RATES:
        for channels, width in ((1, 1), (2, 2), (1, 4)):
            audio, got = read_reference_wav(wav_bytes(rate, rate, channels, width))
            assert got == rate and audio.shape == (rate,) and audio.dtype == np.float32


def test_the_transcript_is_bounded(engine):
    with pytest.raises(EngineInputError) as long:
        engine.register_voice("t", VoiceRef(tone(1), 24000, "x" * (voice_input.MAX_TRANSCRIPT_CHARS + 1)))
    assert long.value.code == "text_too_long"


def test_a_full_queue_answers_busy_and_the_step_never_waits_for_a_registration(engine, monkeypatch):
    started, release = threading.Event(), threading.Event()
    make_voice = engine.model.make_voice
    monkeypatch.setattr(engine.model, "make_voice", lambda ref: started.set() or release.wait(60) and make_voice(ref))
    ref = VoiceRef(tone(1), 24000, x_vector_only=True)
    running = engine.register_voice("slow", ref)
    assert started.wait(30)
    waiting = [engine.register_voice(f"w{i}", ref) for i in range(engine.background.max_waiting)]
    with pytest.raises(EngineInputError) as busy:
        engine.register_voice("one_too_many", ref)
    assert busy.value.code == "busy"
    request = SynthesisRequest(text="Spoken while a registration is stuck.", voice="v1", max_frames=8,
                               ignore_eos=True, sampling=SamplingParams(seed=1))
    chunks = list(engine.submit(request).iter_blocking())            # the whole stream while it is held
    assert sum(len(c.codes) for c in chunks) == 8 and not running.done()
    release.set()
    assert running.result(60) == "slow" and [f.result(60) for f in waiting]
