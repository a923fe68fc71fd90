"""No request can end another: numbers the kernels cannot take are refused up front, a stream whose logits go
non-finite ends alone, and a step that raises ends only the stream(s) that make it raise."""
import math

import pytest

from engine import EngineInputError, SamplingParams, SynthesisRequest

FRAMES = 12


def outcome(handle):
    """Frames delivered, or the error that ended the request."""
    try:
        return sum(len(c.codes) for c in handle.iter_blocking())
    except Exception as exc:                  # noqa: BLE001 - handed to the test
        return exc


def victims(engine, n: int):
    return [engine.submit(SynthesisRequest(text=f"Victim number {k} speaks.", max_frames=FRAMES, ignore_eos=True))
            for k in range(n)]


@pytest.mark.parametrize("field, value", [
    ("temperature", 1e39), ("temperature", 0.0), ("temperature", -1.0), ("temperature", math.inf),
    ("temperature", math.nan), ("temperature", 1e-45), ("top_p", 0.0), ("top_p", 1.5), ("top_p", math.nan),
    ("repetition_penalty", 1e39), ("repetition_penalty", 0.0), ("subtalker_temperature", math.inf),
    ("subtalker_top_p", 2.0), ("top_k", -1), ("top_k", 2 ** 63), ("top_k", 2.5), ("top_k", True),
    ("subtalker_top_k", -5), ("seed", -1), ("seed", 2 ** 63), ("temperature", "hot"),
])
def test_numbers_the_step_cannot_take_are_refused_at_submit(engine, field, value):
    with pytest.raises(EngineInputError) as err:
        engine.submit(SynthesisRequest(text="Hi", sampling=SamplingParams(**{field: value})))
    assert err.value.code == "invalid_request" and field in str(err.value)


def test_extreme_but_valid_numbers_are_spoken(engine):
    extremes = [SamplingParams(temperature=1e38, top_p=1e-30, seed=2 ** 63 - 1),
                SamplingParams(temperature=1.2e-38, repetition_penalty=3e38, top_k=2 ** 62),
                SamplingParams(repetition_penalty=1.2e-38, subtalker_temperature=3e38)]
    handles = [engine.submit(SynthesisRequest(text="Extreme.", sampling=s, max_frames=4, ignore_eos=True))
               for s in extremes]
    outcomes = [outcome(h) for h in handles]
    assert all(o == 4 or isinstance(o, EngineInputError) and o.code == "generation_failed" for o in outcomes)


def test_non_finite_logits_end_that_stream_only(engine, monkeypatch):
    monkeypatch.setattr(engine.validator, "check", lambda request: None)     # a number the checks let through
    others = victims(engine, 3)
    evil = engine.submit(SynthesisRequest(text="x", sampling=SamplingParams(temperature=1e39), max_frames=FRAMES))
    error = outcome(evil)
    assert isinstance(error, EngineInputError) and error.code == "generation_failed" and "NaN" in str(error)
    assert [outcome(h) for h in others] == [FRAMES] * 3
    assert engine.num_active == 0


@pytest.mark.parametrize("position", [3, *(pytest.param(p, marks=pytest.mark.slow) for p in (0, 6))])
def test_a_step_that_raises_for_one_stream_ends_that_stream_only(engine, monkeypatch, position):
    handles = victims(engine, 7)
    evil = engine.submit(SynthesisRequest(text="The evil one.", max_frames=FRAMES, ignore_eos=True))
    handles.insert(position, evil)
    predict = engine.runner.predict

    def faulty(seqs):
        if any(s.id == evil.id for s in seqs):
            raise IndexError("injected fault")
        return predict(seqs)
    monkeypatch.setattr(engine.runner, "predict", faulty)
    outcomes = [outcome(h) for h in handles]
    error = outcomes.pop(position)
    assert isinstance(error, EngineInputError) and error.code == "generation_failed" and "injected" in str(error)
    assert outcomes == [FRAMES] * 7
    assert engine.num_active == 0 and not engine.thread.isolation.groups


def test_a_fault_in_a_prefill_requeues_the_streams_admitted_with_it(engine, monkeypatch):
    prefill = engine.runner.prefill
    calls = []

    def faulty(seqs, prompts):
        calls.append(len(seqs))
        if len(calls) == 1:
            raise RuntimeError("injected prefill fault")
        return prefill(seqs, prompts)
    monkeypatch.setattr(engine.runner, "prefill", faulty)
    handles = victims(engine, 3)
    outcomes = [outcome(h) for h in handles]
    assert outcomes.count(FRAMES) >= 2 and len(calls) >= 2       # a transient fault: at most one stream is blamed
    assert engine.num_active == 0


def test_a_step_that_fails_before_its_talk_leaves_the_talkers_codes_as_without_the_fault(engine, monkeypatch):
    import numpy as np
    request = lambda k: SynthesisRequest(text=f"Talker {k} goes on.", sampling=SamplingParams.greedy(),
                                         max_frames=FRAMES, ignore_eos=True)
    codes = lambda h: np.concatenate([c.codes for c in h.iter_blocking()])
    want = [codes(engine.submit(request(k))) for k in range(2)]
    prefill, calls = engine.runner.prefill, []

    def faulty(seqs, prompts):
        calls.append(len(seqs))
        if len(calls) == 2:                     # the joiner's step, after the talkers took their text ids
            raise RuntimeError("injected prefill fault")
        return prefill(seqs, prompts)
    monkeypatch.setattr(engine.runner, "prefill", faulty)
    talkers = [engine.submit(request(k)) for k in range(2)]
    chunks = [next(iter(h.iter_blocking())) for h in talkers]          # both talking
    joiner = engine.submit(request(9))
    got = [np.concatenate([c.codes, codes(h)]) for c, h in zip(chunks, talkers)]
    assert len(calls) >= 3 and all(np.array_equal(g, w) for g, w in zip(got, want))
    joined = outcome(joiner)
    assert joined == FRAMES or joined.code == "generation_failed"


def test_the_servers_own_faults_stay_retryable(engine, monkeypatch):
    import torch
    predict = engine.runner.predict

    def out_of_memory(seqs):
        raise torch.OutOfMemoryError("injected")
    monkeypatch.setattr(engine.runner, "predict", out_of_memory)
    handles = victims(engine, 2)
    assert all(isinstance(o, torch.OutOfMemoryError) for o in map(outcome, handles))
    monkeypatch.setattr(engine.runner, "predict", predict)
    assert [outcome(h) for h in victims(engine, 2)] == [FRAMES] * 2
