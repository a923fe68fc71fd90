"""The durable voice registry: a voice registered by one engine is stored once and read by every engine that shares
the directory (another replica, or the same server after a restart), bit for bit; a delete or a new registration
by one is seen by the others within a second (a cached voice costs a dict lookup, its file checked at most once a
second); the derived caches are built again after a load."""
import os
import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from engine import Engine, EngineInputError, SamplingParams, SynthesisRequest, VoiceRef
from engine.models.qwen3_tts.voices import RECHECK_S
from fake_clock import FakeClock

VARIANT = "tiny-0.6B-Base"


def reference(hz: float) -> VoiceRef:
    t = np.arange(24000) / 24000
    return VoiceRef((0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32), 24000, "A short reference.")


def codes(engine: Engine, voice: str) -> np.ndarray:
    request = SynthesisRequest(text="Spoken by a stored voice.", voice=voice, max_frames=6,
                               sampling=SamplingParams.greedy(seed=1))
    return np.concatenate([c.codes for c in engine.submit(request).iter_blocking()])


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    root = tmp_path_factory.mktemp("voices")
    pair = [Engine.load(dummy=VARIANT, device="cpu", max_active=2, voices_dir=str(root)).start() for _ in range(2)]
    clock = FakeClock()
    pair[1].voices.clock = clock.monotonic
    yield pair, root, clock
    for engine in pair:
        engine.shutdown()


def test_a_voice_registered_by_one_engine_is_spoken_alike_by_another(engines):
    (a, b), root, _ = engines
    assert a.register_voice("ann", reference(180)).result(60) == "ann"
    files = list(root.rglob("ann.safetensors"))
    assert len(files) == 1 and files[0].parent.name == "dummy-tiny-0.6B-Base"
    assert "ann" in b.voices and b.voices.names() == ["ann"]
    loaded, computed = b.voices.get("ann"), a.voices.get("ann")
    assert loaded is not computed and loaded.codec_state is None and loaded.frame_rows is None
    assert torch.equal(loaded.xvector, computed.xvector) and torch.equal(loaded.ref_codes, computed.ref_codes)
    assert loaded.ref_text_ids == computed.ref_text_ids
    assert np.array_equal(codes(a, "ann"), codes(b, "ann"))
    assert b.voices.get("ann") is loaded                     # cached while its file is unchanged


def test_a_new_registration_and_a_delete_reach_the_other_engine(engines):
    (a, b), _, clock = engines
    a.register_voice("bob", reference(150)).result(60)
    first = b.voices.get("bob")
    a.register_voice("bob", reference(260)).result(60)
    assert b.voices.get("bob") is first                       # within the second: not checked
    clock.advance(RECHECK_S)
    again = b.voices.get("bob")
    assert again is not first and not torch.equal(again.xvector, first.xvector)
    assert a.delete_voice("bob") and not b.delete_voice("bob")
    clock.advance(RECHECK_S)
    assert "bob" not in b.voices and b.voices.get("bob") is None
    with pytest.raises(EngineInputError, match="unknown_voice|no registered voice"):
        codes(b, "bob")


@pytest.mark.slow                                   # a third engine
def test_stored_voices_survive_a_restart(engines):
    (a, _), root, _ = engines
    a.register_voice("cy", reference(210)).result(60)
    before = codes(a, "cy")
    fresh = Engine.load(dummy=VARIANT, device="cpu", max_active=2, voices_dir=str(root)).start()
    try:
        assert "cy" in fresh.voices.names() and np.array_equal(codes(fresh, "cy"), before)
    finally:
        fresh.shutdown()


def test_a_cached_voice_costs_a_lookup_and_its_use_is_recorded_off_the_calling_thread(engines, monkeypatch):
    (a, b), _, clock = engines
    a.register_voice("dee", reference(200)).result(60)
    clock.advance(RECHECK_S)
    voice = b.voices.get("dee")
    stats, touched_on, touched = [], [], threading.Event()
    stat = os.stat
    monkeypatch.setattr(os, "stat", lambda path, *args, **kw: stats.append(str(path)) or stat(path, *args, **kw))
    monkeypatch.setattr(b.voices.store, "touch",
                        lambda name: touched_on.append(threading.current_thread()) or touched.set())
    for _ in range(100):
        assert b.voices.get("dee") is voice and "dee" in b.voices
    assert not [path for path in stats if "dee" in path] and not touched.is_set()
    clock.advance(RECHECK_S)
    assert b.voices.get("dee") is voice and touched.wait(30)
    assert len([path for path in stats if "dee" in path]) == 1 and threading.current_thread() not in touched_on


def test_only_a_clone_voices_first_stream_resets_on_the_scratch_slot(engines):
    (a, _), _, _ = engines
    a.register_voice("cid", reference(210)).result(60)
    seq = SimpleNamespace(conditioning=SimpleNamespace(voice=a.voices.get("cid")))
    plain = SimpleNamespace(conditioning=SimpleNamespace(voice=SimpleNamespace(ref_codes=None, codec_state=None)))
    assert a.model.reset_uses_scratch([plain, seq]) and not a.model.reset_uses_scratch([plain])
    codes(a, "cid")                                          # its first stream primes the voice's codec state
    assert a.voices.get("cid").codec_state is not None and not a.model.reset_uses_scratch([seq])
