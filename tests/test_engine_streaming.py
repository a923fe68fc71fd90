"""Continuous batching, incremental text, chunk schedules: a request's output never depends on its company."""
import dataclasses
import time

import numpy as np
import pytest

from helpers import assert_audio_close

from engine import SamplingParams, SynthesisRequest

TEXTS = ["Hello there, how are you doing today?", "Short one.",
         "The quick brown fox jumps over the lazy dog, again and again, until the sun goes down.",
         "Numbers like 3.14159 and dates like 2026-11-22 are spoken too."]


def run(engine, *requests):
    """(codes, pcm, chunks) of one request, or a list of them for several, submitted together: one batch."""
    handles = [engine.submit(r) for r in requests]
    runs = [(np.concatenate([c.codes for c in chunks]), np.concatenate([c.pcm for c in chunks]), chunks)
            for chunks in (list(h.iter_blocking()) for h in handles)]
    return runs[0] if len(runs) == 1 else runs


def requests():
    return [
        SynthesisRequest(text=TEXTS[0], voice="vivian", sampling=SamplingParams.greedy(), max_frames=30),
        SynthesisRequest(text=TEXTS[1], voice="ryan", language="english", instruct="Happy and fast.",
                         sampling=SamplingParams(seed=7), max_frames=18, ignore_eos=True),
        SynthesisRequest(text=TEXTS[2], voice="aiden", non_streaming_text=True, sampling=SamplingParams.greedy(),
                         max_frames=40, chunk_frames=(2, 5)),
        SynthesisRequest(text=TEXTS[3], voice="serena", language="chinese", sampling=SamplingParams(seed=3, top_k=5),
                         max_frames=25, ignore_eos=True),
    ]


@pytest.fixture(params=[64, 1], ids=["audio-read-at-once", "audio-read-next-step"])
def read_later_from(engine, request):
    engine.step.audio.read_later_from = request.param
    yield request.param
    engine.step.audio.read_later_from = 64


@pytest.mark.slow
def test_mixed_batch_equals_alone_with_late_joins_and_a_cancel(engine, read_later_from):
    alone = [run(engine, r) for r in requests()]
    victim = engine.submit(SynthesisRequest(text=TEXTS[2], voice="vivian", max_frames=200, ignore_eos=True))
    handles = [engine.submit(r) for r in requests()[:2]]
    first = next(handles[0].iter_blocking())           # the others join while these are running
    handles += [engine.submit(r) for r in requests()[2:]]
    got = [[first] + list(handles[0].iter_blocking())] + [list(h.iter_blocking()) for h in handles[1:]]
    victim_chunks = []
    for chunk in victim.iter_blocking():
        victim_chunks.append(chunk)
        if len(victim_chunks) == 3:
            engine.cancel(victim.id)
    assert victim_chunks[-1].final and victim_chunks[-1].finish_reason == "cancelled"
    assert sum(len(c.codes) for c in victim_chunks) < 200
    for (codes, pcm, _), chunks in zip(alone, got):
        np.testing.assert_array_equal(np.concatenate([c.codes for c in chunks]), codes)
        assert_audio_close(np.concatenate([c.pcm for c in chunks]), pcm)
        assert [c.frame_offset for c in chunks] == list(np.cumsum([0] + [len(c.codes) for c in chunks[:-1]]))
        assert [c.final for c in chunks] == [False] * (len(chunks) - 1) + [True]
    deadline = time.time() + 5
    while engine.num_active and time.time() < deadline:
        time.sleep(0.01)
    assert engine.num_active == 0


@pytest.mark.parametrize("schedule", [(1, 2, 4, 8)] + [pytest.param(s, marks=pytest.mark.slow)   # one in the inner loop
                                                      for s in [(1,), (3, 7, 5), (16,)]])
def test_any_chunk_schedule_gives_the_same_audio(engine, schedule, read_later_from):
    base = SynthesisRequest(text=TEXTS[0], voice="vivian", sampling=SamplingParams.greedy(), max_frames=33,
                            ignore_eos=True)
    scheduled = dataclasses.replace(base, chunk_frames=schedule, adaptive_chunks=False)
    (codes, pcm, _), (codes2, pcm2, chunks) = run(engine, base, scheduled)
    np.testing.assert_array_equal(codes2, codes)
    assert_audio_close(pcm2, pcm)
    sizes = [len(c.codes) for c in chunks]
    expected = [schedule[min(i, len(schedule) - 1)] for i in range(len(sizes))]
    assert sizes[0] in (expected[0], max(expected[0], 2))      # two frames first while steps run long
    assert sizes[1:-1] == expected[1:-1] and sizes[-1] <= expected[-1]
    assert [c.sample_offset for c in chunks] == list(np.cumsum([0] + [len(c.pcm) for c in chunks[:-1]]))


@pytest.mark.slow                                   # every split of a text
def test_incremental_text_equals_whole_text(engine):
    text = TEXTS[2]
    whole, whole_pcm, _ = run(engine, SynthesisRequest(text=text, voice="aiden", sampling=SamplingParams.greedy(),
                                                       max_frames=60))
    pieces = [text[:1], text[1:7], text[7:8], text[8:30], text[30:31], text[31:]]
    h = engine.submit(SynthesisRequest(text=pieces[0], voice="aiden", sampling=SamplingParams.greedy(),
                                       max_frames=60, text_complete=False))
    chunks = []
    for piece in pieces[1:]:
        time.sleep(0.15)             # the talker catches up with the text and waits for more
        engine.append_text(h.id, piece)
    time.sleep(0.15)
    engine.close_text(h.id)
    chunks = list(h.iter_blocking())
    np.testing.assert_array_equal(np.concatenate([c.codes for c in chunks]), whole)
    assert_audio_close(np.concatenate([c.pcm for c in chunks]), whole_pcm)


@pytest.mark.slow                                   # waits for the talker to catch up
def test_waiting_for_text_does_not_stall_others(engine):
    waiting = engine.submit(SynthesisRequest(text="Wait for", voice="vivian", text_complete=False, max_frames=50))
    steps = engine.step.steps
    codes, _, _ = run(engine, SynthesisRequest(text=TEXTS[0], voice="ryan", max_frames=30, ignore_eos=True))
    assert len(codes) == 30 and engine.step.steps - steps <= 30 + 3      # a frame a step, its prefill's step aside
    engine.append_text(waiting.id, " it.")
    engine.close_text(waiting.id)
    chunks = list(waiting.iter_blocking())
    assert chunks[-1].final and sum(len(c.codes) for c in chunks) >= 1


def test_default_length_budget_stops_runaway(engine):
    codes, _, chunks = run(engine, SynthesisRequest(text="Hi.", voice="vivian", ignore_eos=True))
    assert chunks[-1].finish_reason == "length" and 0 < len(codes) <= 40 + 8 * 3


def test_text_appended_after_the_text_was_closed_is_not_spoken(engine):
    request = lambda: SynthesisRequest(text=TEXTS[1], voice="ryan", sampling=SamplingParams.greedy(), max_frames=30)
    alone = engine.submit(request())                                        # the three side by side: one batch
    late = engine.submit(request())
    engine.append_text(late.id, " And this came after the end of the text.")   # a caller bug: ignored, not spoken
    incremental = engine.submit(SynthesisRequest(text=TEXTS[1], voice="ryan", sampling=SamplingParams.greedy(),
                                                 max_frames=30, text_complete=False))
    engine.close_text(incremental.id)
    engine.append_text(incremental.id, " More after close.")
    codes = np.concatenate([c.codes for c in alone.iter_blocking()])
    assert np.array_equal(np.concatenate([c.codes for c in late.iter_blocking()]), codes)
    assert np.array_equal(np.concatenate([c.codes for c in incremental.iter_blocking()]), codes)


def test_unset_sampling_fields_come_from_the_checkpoint_generation_config(engine):
    request = SynthesisRequest(text=TEXTS[0], voice="vivian", max_frames=12, ignore_eos=True)
    (greedy, _, _), (sampled, _, _) = run(engine, dataclasses.replace(request, sampling=SamplingParams.greedy()),
                                          dataclasses.replace(request, sampling=SamplingParams(seed=1)))
    assert not np.array_equal(sampled, greedy)
    generation = engine.model.cfg.generation
    engine.model.cfg.generation = dict(generation, do_sample=False, subtalker_dosample=False)
    try:
        codes, _, _ = run(engine, request)
    finally:
        engine.model.cfg.generation = generation
    np.testing.assert_array_equal(codes, greedy)


def test_the_greedy_graphs_serve_batches_up_to_their_rows_and_the_sampling_graph_the_rest():
    """Start-up captures the all-greedy graphs up to GREEDY_ROWS only; a larger all-greedy batch takes the sampling
    graph, whose greedy rows give the same codes (test_mixed_batch_equals_alone_with_late_joins_and_a_cancel)."""
    from types import SimpleNamespace

    from engine.models.qwen3_tts.stages import GREEDY_ROWS, TalkerStages
    greedy = SimpleNamespace(request=SimpleNamespace(sampling=SamplingParams.greedy()))
    stages = TalkerStages()
    assert stages.variant("talk", [greedy] * GREEDY_ROWS) is True
    assert stages.variant("talk", [greedy] * (GREEDY_ROWS + 1)) is False
    assert dict(stages.graph_variants) == {False: None, True: GREEDY_ROWS}
