"""The aligner's device time planned into the engine's frames (engine/core/turn_plan.py), on the fake clock with a
stand-in forward that costs device time per audio-second: under a steady load every window is aligned before a
real-time player reaches it and no step starts later than a frame after the one before; under overload new contexts
are refused words with the reason, and every context admitted still gets each window in time."""
import pytest

from turn_sim import FRAME_S, GFLOP_S, Frames


def contexts(per_second: float, seconds: float, length: float) -> list[tuple[float, float]]:
    return [(0.5 + i / per_second, length) for i in range(int(per_second * seconds))]


@pytest.mark.parametrize("step_ms, per_second", [(50, 40), (62, 22)])
def test_a_steady_load_gets_every_window_aligned_before_it_is_due(step_ms, per_second):
    """Steps leave 30 ms (and 18 ms) of each 80 ms frame; contexts of 5 windows start 40 (22) a second: the aligner's
    measured device time within 80% of the planned share."""
    frames = Frames(step_ms / 1000)
    frames.run(12.0, contexts(per_second, 6.0, 5))
    assert not frames.refused
    assert len(frames.due) == len(frames.aligner.finished) == int(per_second * 6.0) * 5
    assert frames.late() == []
    gaps = [b - a for a, b in zip(frames.step_starts, frames.step_starts[1:])]
    assert max(gaps) <= FRAME_S + 1e-9                   # no step waits past its frame for a turn
    assert sum(g > step_ms / 1000 + 1e-9 for g in gaps) > len(gaps) / 2      # turns were given, most frames
    assert abs(frames.service.costs.per_gflop_s - GFLOP_S) < 0.1 * GFLOP_S         # the cost per slice, learnt


def test_overload_refuses_new_contexts_words_and_keeps_every_admitted_one_in_time():
    """Steps leave 14 ms of a frame (6 ms planned for side work), 80 contexts a second ask for words: most are
    refused with the reason (the demand past the share, or a job that waited a second), up front; the others get
    every window before it is due."""
    frames = Frames(0.066)
    frames.run(10.0, contexts(80, 8.0, 6))
    asked = int(80 * 8.0)
    assert asked / 2 < len(frames.refused) < asked
    assert all("no time left for word alignment" in r or "the aligner is behind" in r for r in frames.refused)
    assert frames.due and frames.late() == []
    gaps = [b - a for a, b in zip(frames.step_starts, frames.step_starts[1:])]
    assert max(gaps) <= FRAME_S + 1e-9


def test_admission_keeps_only_its_window_of_the_aligners_device_time():
    from aligner.words_admission import WordsAdmission
    from fake_clock import FakeClock
    clock = FakeClock()
    admission = WordsAdmission(clock)
    for _ in range(1000):                                  # turns of contexts admitted long ago, none new
        admission.used(0.002)
        clock.advance(0.1)
    assert len(admission.spent) <= 21 and abs(admission.device_s - 0.002 * len(admission.spent)) < 1e-9
    assert abs(admission.recent_use() - 0.002 * len(admission.spent) / 2.0) < 1e-9     # over its 2 s window
    assert admission.admit(0.001, capacity=1.0, late_s=-3.0) is None          # 0.02 device-s/s + 2 audio-s/s new
    assert "no time left" in admission.admit(0.001, capacity=0.02, late_s=-3.0)
    assert "behind" in admission.admit(0.001, capacity=1.0, late_s=-0.2)       # words 0.2 s ahead: too close (1 s margin)
    assert "behind" in admission.admit(0.001, capacity=1.0, late_s=1.0)
    assert admission.refused_behind == 2                   # /metrics tells the two reasons apart


def test_admission_counts_the_aligners_turns_and_the_admissions_from_two_threads():
    """used() runs on the aligner's thread, admit() on the engine core's: the window they both trim stays whole."""
    import sys
    import threading
    import time

    from aligner.words_admission import WordsAdmission

    class Clock:
        def monotonic(self):
            return time.monotonic()
    admission, errors = WordsAdmission(Clock(), window_s=0.01, ramp_s=0.01), []

    def hammer(fn):
        try:
            for _ in range(60000):
                fn()
        except Exception as exc:        # an IndexError from a window trimmed twice
            errors.append(exc)
    threads = [threading.Thread(target=hammer, args=(lambda: admission.used(0.001),)),
               threading.Thread(target=hammer, args=(lambda: admission.admit(1e-6, 1e9, -9.0),))]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)              # threads switch between any two bytecodes: the race shows at once
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors
    assert abs(admission.device_s - sum(d for _, d in admission.spent)) < 1e-6
