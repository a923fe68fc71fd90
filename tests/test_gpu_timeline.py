"""The GPU timeline's averages from events on a clock the test moves: each stage, the main stream's span and idle gap
before a step (the side decode apart), and steps read only once all their events are done (no sync)."""
from engine.core import gpu_timeline
from engine.core.gpu_timeline import GpuTimeline


class Clock:
    now = 0.0


class FakeEvent:
    """Records the clock; done once the device (the test) says so."""
    def __init__(self):
        self.t, self.done = None, False

    def record(self):
        self.t = Clock.now

    def query(self) -> bool:
        return self.done

    def elapsed_time(self, other) -> float:
        return other.t - self.t


def run_stage(timeline, name, ms, side=False):
    with timeline.stage(name, side):
        Clock.now += ms


def finish(timeline):
    for marks in timeline.done_steps:
        for _, start, end, _ in marks:
            start.done = end.done = True


def test_stages_the_step_and_the_idle_gap_average_and_a_step_is_read_only_once_done(monkeypatch):
    monkeypatch.setattr(gpu_timeline, "NEWEST", 0.5)
    Clock.now = 0.0
    timeline = GpuTimeline(True, FakeEvent)
    run_stage(timeline, "prefill", 2.0)
    run_stage(timeline, "predict", 10.0)
    run_stage(timeline, "predict", 1.0)          # a stage twice in a step: its times add
    run_stage(timeline, "talk", 5.0)
    timeline.end_step()
    assert timeline.ms == {} and len(timeline.done_steps) == 1          # the device has not finished: nothing read
    finish(timeline)
    timeline.end_step()
    assert timeline.ms == {"prefill": 2.0, "predict": 11.0, "talk": 5.0, "step": 18.0} and not timeline.done_steps

    Clock.now += 3.0                             # the device waits 3 ms for the host
    run_stage(timeline, "predict", 9.0)
    timeline.end_step()
    finish(timeline)
    timeline.end_step()
    assert timeline.ms["idle"] == 3.0 and timeline.ms["predict"] == 10.0 and timeline.ms["step"] == 13.5
    assert timeline.ms["prefill"] == 1.0 and timeline.ms["talk"] == 2.5      # not run this step: they decay

    Clock.now += gpu_timeline.BUSY_GAP_MS + 1    # an engine without work is not a bubble
    run_stage(timeline, "predict", 10.0)
    timeline.end_step()
    finish(timeline)
    timeline.end_step()
    assert timeline.ms["idle"] == 1.5


def test_a_failed_steps_stages_are_dropped_not_merged_into_the_next():
    Clock.now = 0.0
    timeline = GpuTimeline(True, FakeEvent)
    run_stage(timeline, "predict", 30.0)
    timeline.drop_step()                         # the step raised before its end
    run_stage(timeline, "predict", 10.0)
    timeline.end_step()
    finish(timeline)
    timeline.end_step()
    assert timeline.ms == {"predict": 10.0, "step": 10.0}


def test_off_the_gpu_it_records_nothing():
    timeline = GpuTimeline(False, FakeEvent)
    run_stage(timeline, "predict", 1.0)
    timeline.end_step()
    assert timeline.ms == {} and not timeline.done_steps


def test_the_side_decode_counts_as_itself_and_neither_in_the_step_nor_the_idle_gap(monkeypatch):
    monkeypatch.setattr(gpu_timeline, "NEWEST", 0.5)
    Clock.now = 0.0
    timeline = GpuTimeline(True, FakeEvent)
    run_stage(timeline, "predict", 10.0)
    run_stage(timeline, "decode", 20.0, side=True)    # 10 -> 30 on the side stream
    timeline.end_step()
    Clock.now = 12.0                                  # the next step's first stage, 2 ms after the main stream's last
    run_stage(timeline, "predict", 8.0)
    finish(timeline)
    timeline.end_step()
    finish(timeline)
    timeline.end_step()
    assert timeline.ms == {"predict": 9.0, "decode": 10.0, "step": 9.0, "idle": 2.0}
