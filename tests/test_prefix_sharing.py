"""Prompt prefixes prefilled once and their KV blocks shared (engine/core/prefix_cache.py): the same codes as streams that
prefill their whole prompt themselves; blocks counted once, freed with their last user, evicted when needed."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from engine import Engine, SamplingParams, SynthesisRequest, VoiceRef
from engine.models.qwen3_tts.config import TTSConfig
from engine.core.kv_cache import PagedKVCache
from engine.core.sequence import KVState
from engine.models.qwen3_tts.checkpoint import dummy_configs

SR = 24000
REF_TEXT = "A reference clip, read slowly and clearly, so that its transcript spans more than one block."
INSTRUCT = "Speak slowly and softly, like a tired old storyteller by the fire late at night, please."
TEXTS = ["Hello there, how are you doing today?", "Short one.", "Numbers like 3.14159 are spoken too.",
         "The quick brown fox jumps over the lazy dog."]


def tone(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (0.3 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 1.3 * t)).astype(np.float32)


@pytest.fixture(scope="module")
def engines(engine):
    clone = Engine.load(dummy="tiny-1.7B-Base", device="cpu", max_active=8).start()
    clone.register_voice("clone", VoiceRef(tone(2.0), SR, REF_TEXT)).result()
    yield dict(clone=clone, speaker=engine)
    clone.shutdown()


CASES = {"icl-streaming": ("clone", dict(voice="clone", language="english")),
         "icl-non-streaming": ("clone", dict(voice="clone", language="english", non_streaming_text=True)),
         "speaker-instruct": ("speaker", dict(voice="ryan", language="english", instruct=INSTRUCT))}


def codes(handle) -> np.ndarray:
    return np.concatenate([c.codes for c in handle.iter_blocking()])


@pytest.mark.slow                                   # parity: three engines, shared and unshared prefill
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_streams_sharing_a_prefix_give_the_codes_of_streams_that_prefill_it_themselves(engines, case, monkeypatch):
    engine, kw = engines[case[0]], case[1]
    request = lambda text: SynthesisRequest(text=text, sampling=SamplingParams.greedy(), max_frames=12, **kw)
    engine.model.builder.share_prefixes = False
    try:
        alone = [codes(engine.submit(request(t))) for t in TEXTS]
    finally:
        engine.model.builder.share_prefixes = True
    kv, tables = engine.runner.kv, []
    start = kv.start
    monkeypatch.setattr(kv, "start", lambda seq, prompt: (start(seq, prompt), tables.append(seq.kv.block_table[:])))
    for _ in range(2):                    # the first round fills the prefix, the second finds it cached
        handles = [engine.submit(request(t)) for t in TEXTS]
        for handle, want in zip(handles, alone):
            np.testing.assert_array_equal(codes(handle), want)
    entry = next(e for e in kv.prefixes.entries.values() if e.blocks[:1] == tables[0][:1])
    full = entry.length // kv.block_size
    assert full >= 1 and entry.length % kv.block_size        # whole blocks shared, and a partial one copied
    assert {tuple(t[:full]) for t in tables} == {tuple(entry.blocks[:full])}
    assert len({t[full] for t in tables}) == len(tables) and entry.blocks[full] not in {t[full] for t in tables}
    assert entry.users == 0 and engine.scheduler.admission.reserved == 0


def test_a_streamed_joiner_after_a_cached_prefix_rides_the_talk_with_the_codes_of_its_own_prefill(engine,
                                                                                                      monkeypatch):
    request = lambda: SynthesisRequest(text=TEXTS[2], sampling=SamplingParams.greedy(), max_frames=8, voice="ryan",
                                       language="english")
    engine.model.builder.share_prefixes = False
    try:
        alone = codes(engine.submit(request()))             # its whole prompt through the prefill stage
    finally:
        engine.model.builder.share_prefixes = True
    codes(engine.submit(request()))                         # the prefix filled
    runs, talks, prefixes = [], [], []
    stage, talk, start = engine.runner.prefill_stage, engine.runner.talk, engine.runner.kv.start
    monkeypatch.setattr(engine.runner, "prefill_stage", lambda *a: (runs.append(a), stage(*a))[1])
    monkeypatch.setattr(engine.runner, "talk", lambda t: (talks.append(list(t.positions)), talk(t))[1])
    monkeypatch.setattr(engine.runner.kv, "start", lambda s, p: (prefixes.append(p.prefix.length), start(s, p))[1])
    np.testing.assert_array_equal(codes(engine.submit(request())), alone)
    assert runs == [] and talks[0] == prefixes and prefixes[0] > 0     # no prefill pass: its row rode the talk


@pytest.mark.slow                                   # a Base engine and a registration
def test_an_icl_prompt_whose_streamed_text_covers_the_frames_keeps_tts_eos_for_later(engines):
    engine = engines["clone"]
    voice = engine.voices.get("clone")
    frames = voice.ref_codes.shape[0]
    feed = voice.ref_text_ids + [9707] * (frames + 1 - len(voice.ref_text_ids))
    prompt = engine.model.builder.build(voice, None, None, [151644, 77091, 198], feed, closed=False,
                                        non_streaming=False)
    assert prompt.consumed == frames + 1 and not prompt.eos_consumed


def kv_cache(blocks: int, dtype=torch.float32) -> PagedKVCache:
    cfg = TTSConfig.from_dicts(*dummy_configs("tiny")).talker
    return PagedKVCache(cfg, blocks + 1, 16, 3, 8, dtype, "cpu")


def stream(slot: int) -> SimpleNamespace:
    return SimpleNamespace(slot=slot, kv=KVState())


def prompt(key: str, prefix: int, own: int) -> SimpleNamespace:
    return SimpleNamespace(prefix=SimpleNamespace(key=key, length=prefix), rows=torch.zeros(own, 1),
                           length=prefix + own)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float8_e4m3fn])     # the partial block copied as bytes
def test_prefix_blocks_are_shared_freed_with_their_last_user_and_evicted_when_blocks_run_out(dtype):
    kv = kv_cache(8, dtype)
    a, b = stream(0), stream(1)
    for s in (a, b):
        assert kv.can_start(prompt("p", 20, 5))
        kv.start(s, prompt("p", 20, 5))        # the prefix: 2 blocks, the first full; 25 tokens: 1 block of its own
    entry = a.kv.cached_prefix
    assert a.kv.block_table[0] == b.kv.block_table[0] == entry.blocks[0] and len(kv.free_blocks) == 8 - 2 - 2
    assert a.kv.num_tokens == 25 and len({a.kv.block_table[1], b.kv.block_table[1], entry.blocks[1]}) == 3
    kv.k[:, entry.blocks[1] * 16:entry.blocks[1] * 16 + 4] = 7.0
    kv.copy_partial_blocks([a, b])
    for s in (a, b):
        assert (kv.k[:, s.kv.block_table[1] * 16:s.kv.block_table[1] * 16 + 4].float() == 7.0).all()
    kv.release(a)
    assert entry.users == 1 and len(kv.free_blocks) == 5
    kv.release(b)
    assert kv.available() == 8 and kv.prefixes.idle_blocks == 2 and "p" in kv.prefixes.entries
    c = stream(2)
    assert not kv.can_start(prompt("q", 40, 80)) and kv.can_start(prompt("q", 40, 60))
    kv.start(c, prompt("q", 40, 60))           # 3 blocks of prefix, 5 of its own: "p" makes room
    assert "p" not in kv.prefixes.entries and len(kv.free_blocks) == 0
    kv.release(c)
    assert kv.available() == 8
