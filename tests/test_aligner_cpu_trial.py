"""Word timestamps on a CPU trial: `serve --dummy-aligner` picks the tiny aligner there (the published size takes
longer than --aligner-timeout a job on a laptop's cores), and it gives words."""
import argparse

import numpy as np
import pytest

from gateway.commands import serve
from gateway.engine_process import EngineSpec

pytestmark = pytest.mark.slow                # `serve` processes


def serve_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    serve.add_parser(parser.add_subparsers())
    return parser.parse_args(["serve", *argv])


def test_a_bare_dummy_aligner_flag_means_by_device():
    assert serve_args("--dummy", "tiny", "--dummy-aligner").dummy_aligner == "auto"
    assert serve_args("--dummy", "tiny", "--dummy-aligner", "published").dummy_aligner == "published"


def test_the_auto_dummy_aligner_on_a_cpu_is_tiny_and_aligns(monkeypatch):
    """The engine's kernels are chosen before the aligner captures its graphs (they replay what was chosen then)."""
    import aligner
    from engine.kernels import registry
    calls = []
    select, load = registry.select, aligner.Aligner.load.__func__
    monkeypatch.setattr(registry, "select", lambda *a, **k: calls.append("select") or select(*a, **k))
    monkeypatch.setattr(aligner.Aligner, "load", classmethod(lambda *a, **k: calls.append("aligner") or load(*a, **k)))
    engine, service = EngineSpec(dummy="tiny", device="cpu", max_active=2, dummy_aligner="auto").build()
    try:
        assert calls[:2] == ["select", "aligner"]
        assert service.aligner.name == "dummy:tiny"
        audio = (0.1 * np.random.default_rng(0).standard_normal(6 * 24000)).astype(np.float32)
        spans = service.submit(audio, ["a", "trial", "on", "a", "laptop"]).result(120)
        assert len(spans) == 5 and all(0 <= s <= e for s, e in spans)      # (random weights: arbitrary times)
    finally:
        service.close()
        engine.shutdown()


def test_a_dummy_aligner_can_answer_as_a_speaker_while_its_forward_runs():
    """`--dummy-aligner-times speaker`: words as said at an even pace from each window's start (the units past its
    audio at its end), so words settle as speech's would; the random model's forward still runs for its cost."""
    from aligner.speaker_times import CHAR_S, CJK_S, said

    assert serve_args("--dummy", "tiny", "--dummy-aligner", "--dummy-aligner-times", "model").dummy_aligner_times \
        == "model" and serve_args("--dummy", "tiny").dummy_aligner_times == "speaker"
    assert said(["ab", "c", "你", "好", "later"], 0.7) == [
        (0.0, round(2 * CHAR_S, 3)), (round(3 * CHAR_S, 3), round(4 * CHAR_S, 3)),
        (round(5 * CHAR_S, 3), round(5 * CHAR_S + CJK_S, 3)), (round(5 * CHAR_S + CJK_S, 3), 0.7), (0.7, 0.7)]
    engine, service = EngineSpec(dummy="tiny", device="cpu", max_active=2, dummy_aligner="tiny",
                                 dummy_aligner_times="speaker").build()
    try:
        turns = service.stats["batches"]
        units = ["a", "trial", "on", "a", "laptop"]
        assert service.submit(np.zeros(6 * 24000, np.float32), units).result(120) == said(units, 6.0)
        assert service.stats["batches"] == turns + 1 and service.aligner.name == "dummy:tiny"
    finally:
        service.close()
        engine.shutdown()


def test_the_speakers_times_read_the_forward_but_do_not_repair_its_random_times(monkeypatch):
    """The forward's classes are read as a trained model's are; the repair a random model's disordered times would
    need (a trained model's in order skip it) is not run."""
    import aligner.align
    from aligner import Aligner
    from aligner.forward import Forward
    from aligner.speaker_times import SpeakerTimes, said

    reads, read = [], Forward.read
    monkeypatch.setattr(Forward, "read", lambda self: reads.append(1) or read(self))
    monkeypatch.setattr(aligner.align, "repair", lambda values: (_ for _ in ()).throw(AssertionError("repaired")))
    speaker = SpeakerTimes(Aligner.load(dummy="tiny", device="cpu"))
    items = [(np.zeros(24000, np.float32), ["one", "two"]), (np.zeros(2400, np.float32), [])]
    assert speaker.align_units(items, 24000) == [said(["one", "two"], 1.0), said([], 0.1)]
    assert reads == [1]
