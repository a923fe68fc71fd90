"""A batch's mel and its first part's inputs are queued before its first turn (on the aligner's stream, beside the
engine's step), so that a turn holds the graphs alone; the words are those of a forward that makes them in its turns."""
import contextlib
import types

import numpy as np
import pytest
import torch

import aligner.align
from aligner import Aligner
from tests.graph_stand_in import stand_in_graphs


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return Aligner.load(dummy="tiny", device="cpu", seed=3)


class Turns:
    """One slice a turn, recording what the device was given before each turn and within it."""

    def __init__(self, log: list):
        self.log = log

    @contextlib.contextmanager
    def __call__(self, weights):
        self.log.append("turn")
        yield 1, types.SimpleNamespace(after=None, end=lambda done=None, started=None: None)


def recorded(monkeypatch, tiny, log: list) -> None:
    mel, inputs = aligner.align.log_mels, tiny.model.inputs
    monkeypatch.setattr(aligner.align, "log_mels", lambda *a, **k: (log.append("mel"), mel(*a, **k))[1])
    monkeypatch.setattr(tiny.model, "inputs", lambda *a, **k: (log.append("inputs"), inputs(*a, **k))[1])


def items(seconds: list[float], seed: int = 2) -> list:
    rng = np.random.default_rng(seed)
    return [((0.1 * rng.standard_normal(int(s * 24000))).astype(np.float32), ["a", "b", "c"]) for s in seconds]


def test_the_mel_and_the_first_inputs_come_before_the_first_turn(tiny, monkeypatch):
    log = []
    recorded(monkeypatch, tiny, log)
    tiny.align_units(items([0.5, 3.0, 1.2]), 24000, Turns(log))
    assert log[:3] == ["mel", "inputs", "turn"]
    assert log.count("mel") == 1 and log.count("inputs") == 1       # one part: its inputs made once
    assert log.count("turn") == tiny.slices


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
    assert parts == 2 and log[:3] == ["mel", "inputs", "turn"]
    second = log.index("inputs", 2)
    assert log[second - 1] == "turn" and log[:second].count("turn") == len(tiny.model.encoder) + len(tiny.model.text) + 1
    assert turned == whole
