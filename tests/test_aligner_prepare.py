"""A batch's mel and its first part's inputs are queued at its first turn's start, before its wait for the engine's step
(on the aligner's stream, beside the step's tail), so that what follows the step is the graphs alone; the time they
outlast the step is the aligner's, counted with its turns'; the words are those of a forward that makes them in its
turns."""
import contextlib
import types

import numpy as np
import pytest
import torch

import aligner.align
from aligner.features import joined
from aligner import Aligner
from tests.graph_stand_in import stand_in_graphs


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return Aligner.load(dummy="tiny", device="cpu", seed=3)


class Turns:
    """One slice a turn, recording each turn's start and the wait for the step (`after`) that its work follows."""

    def __init__(self, log: list):
        self.log = log

    @contextlib.contextmanager
    def __call__(self, weights):
        self.log.append("turn")
        yield 1, types.SimpleNamespace(after="step", end=lambda done=None, started=None, beside=None:
                                       self.log.append("end" + " beside" * bool(beside)))


class Stream:
    """The aligner's stream stood in for on the CPU: records the wait for the step."""

    def __init__(self, log: list):
        self.log = log

    def wait_event(self, event):
        self.log.append(f"wait {event}")


def recorded(monkeypatch, tiny, log: list) -> None:
    mel, inputs = aligner.align.log_mels, tiny.model.inputs
    monkeypatch.setattr(tiny, "stream", Stream(log))
    monkeypatch.setattr(tiny, "_on_stream", contextlib.nullcontext)
    monkeypatch.setattr(aligner.align, "joined", lambda audios, pin: joined(audios))      # no pinned memory here
    monkeypatch.setattr(aligner.align.torch.cuda, "Event", lambda **k: types.SimpleNamespace(record=lambda: None))
    monkeypatch.setattr(aligner.align, "log_mels", lambda *a, **k: (log.append("mel"), mel(*a, **k))[1])
    monkeypatch.setattr(tiny.model, "inputs", lambda *a, **k: (log.append("inputs"), inputs(*a, **k))[1])


def items(seconds: list[float], seed: int = 2) -> list:
    rng = np.random.default_rng(seed)
    return [((0.1 * rng.standard_normal(int(s * 24000))).astype(np.float32), ["a", "b", "c"]) for s in seconds]


def test_the_mel_and_the_first_inputs_come_before_the_first_turns_wait_for_the_step(tiny, monkeypatch):
    log = []
    recorded(monkeypatch, tiny, log)
    tiny.align_units(items([0.5, 3.0, 1.2]), 24000, Turns(log))
    assert log[:4] == ["turn", "mel", "inputs", "wait step"]
    assert log.count("mel") == 1 and log.count("inputs") == 1       # one part: its inputs made once
    assert log.count("turn") == log.count("wait step") == tiny.slices
    assert [e for e in log if e.startswith("end")] == ["end beside"] + ["end"] * (tiny.slices - 1)   # timed once


@pytest.mark.slow
def test_a_later_parts_inputs_come_within_its_turn_and_the_words_are_unchanged(tiny, monkeypatch):
    """Two parts on the same (stood-in) graphs: the second part's inputs in the turn of its first slice; the spans are
    those of the whole forward at once."""
    stand_in_graphs(monkeypatch, rows=[1, 2, 4])
    for stage in tiny.model.encoder + tiny.model.text:
        monkeypatch.setattr(stage, "graphs", {})
    batch = items([8.0] * 8)
    whole = tiny.align_units(batch, 24000)
    tiny.model.capture()
    log = []
    recorded(monkeypatch, tiny, log)
    turned = tiny.align_units(batch, 24000, Turns(log))
    parts = log.count("inputs")
    assert parts == 2 and log[:4] == ["turn", "mel", "inputs", "wait step"]
    second = log.index("inputs", 3)                  # within its first slice's turn, after that turn's wait
    assert log[second - 2:second] == ["turn", "wait step"]
    assert log[:second].count("turn") == len(tiny.model.encoder) + len(tiny.model.text) + 1
    assert turned == whole


@pytest.mark.parametrize("mel, after, counted", [((-0.003, 0.002), 0.0, 0.002), ((-0.003, -0.001), 0.0, 0.0),
                                                  ((0.001, 0.003), 0.0, 0.002), ((-0.003, 0.002), None, 0.005)])
def test_the_mel_counts_where_it_outlasts_the_step_it_was_queued_beside(mel, after, counted):
    """A turn of 5 ms after a mel queued beside the step: where the mel ends 2 ms past the step, the aligner's device
    time and learnt costs hold 7 ms; where it ends within the step's gaps, 5 (its span, waiting on a low-priority
    stream for the step's kernels, is no measure of its work); where the device waited for the host to queue it after
    the step, its span; after no step (an idle engine), its span. The engine's plan reads the turn's 5 ms."""
    from test_aligner_asked_turn import grant, serving
    from turn_sim import Mark

    class Beside:
        slices = 1
        turns = []

        def launch_units(self, items, rate, turn):
            with turn([1.0]) as (count, now):
                self.turns.append(now)
                start = max(mel[1], 0.0)
                now.end(Mark(start + 0.005), Mark(start), beside=(Mark(mel[0]), Mark(mel[1])))
            return [[(0.0, 0.1)] * len(units) for _, units in items]

        def finish(self, launched):
            return launched

    aligner = Beside()
    with serving(aligner) as (gate, service):
        future = service.submit(np.zeros(24000, np.float32), ["a"])
        grant(gate, after=None if after is None else Mark(after))
        future.result(10)
        assert abs(service.stats["device_seconds"] - 0.005 - counted) < 1e-9
        assert abs(service.admission.device_s - 0.005 - counted) < 1e-9
        assert abs(aligner.turns[0].seconds() - 0.005) < 1e-9
