"""What a step costs as the engine measures it: a moving average, and a line from the fastest step through the
streams' marginal cost, so admission can project a batch's step before the batch runs."""
import math

SLOPE_STREAMS = 128     # fewer streams' steps are the floor plus noise: their slope would refuse a burst


class StepCost:
    def __init__(self):
        self.s = 0.0                          # moving average, the host work between steps included
        self.floor_s: float | None = None     # the fastest step that drew frames
        self.per_stream_s: float | None = None  # from steps of many streams that started none (a prefill is no stream's)

    @property
    def ms(self) -> float:
        return self.s * 1000

    def observe(self, seconds: float, streams: int, started: int) -> None:
        self.s = 0.9 * self.s + 0.1 * seconds
        if not streams:
            return
        self.floor_s = seconds if self.floor_s is None else min(self.floor_s, seconds)
        if started or streams < SLOPE_STREAMS:
            return
        slope = (seconds - self.floor_s) / streams
        self.per_stream_s = slope if self.per_stream_s is None else 0.9 * self.per_stream_s + 0.1 * slope

    def streams_within(self, ms: float) -> float:
        """How many streams the line keeps a step within `ms`: unbounded before a step without starts was measured."""
        if not self.per_stream_s:
            return math.inf
        return max(0, math.floor((ms / 1000 - self.floor_s) / self.per_stream_s))
