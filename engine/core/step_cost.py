"""What a step costs as the engine measures it: a moving average, and a line from the fastest step through the cost
each stream adds, so admission can project a batch's step before the batch runs."""
import math

import numpy as np

SLOPE_STREAMS = 128     # fewer streams' steps are the floor plus noise: their slope would refuse a burst
FORGET = 0.95           # the fit's memory: about the last 20 steps
FIT_STEPS = 20          # a burst's first steps of many streams fit a line of noise: it would refuse the burst


class StepCost:
    def __init__(self):
        self.s = 0.0                          # moving average, the host work between steps included
        self.floor_s: float | None = None     # the fastest step that drew frames
        self.per_stream_s: float | None = None
        self._gram, self._moment = np.zeros((2, 2)), np.zeros(2)
        self.fitted = 0                       # steps of many streams seen

    @property
    def ms(self) -> float:
        return self.s * 1000

    def observe(self, seconds: float, streams: int, started: int) -> None:
        """Steps under churn nearly all start streams, so the fit takes a start's prefill as a term of its own:
        step - floor = per_stream * streams + per_start * started, least squares over the recent steps."""
        self.s = 0.9 * self.s + 0.1 * seconds
        if not streams:
            return
        self.floor_s = seconds if self.floor_s is None else min(self.floor_s, seconds)
        if streams < SLOPE_STREAMS:
            return
        x = np.array([streams, started], float)
        self._gram = FORGET * self._gram + np.outer(x, x)
        self._moment = FORGET * self._moment + x * (seconds - self.floor_s)
        self.fitted += 1
        if self.fitted < FIT_STEPS:
            return
        if np.linalg.det(self._gram) > 1e-6 * self._gram[0, 0] * self._gram[1, 1] > 0:     # starts that vary apart
            self.per_stream_s = max(0.0, float(np.linalg.solve(self._gram, self._moment)[0]))
        else:                                 # no starts to tell apart: the streams alone
            self.per_stream_s = float(self._moment[0] / self._gram[0, 0])

    def streams_within(self, ms: float) -> float:
        """How many streams the line keeps a step within `ms`: unbounded before FIT_STEPS steps of many streams."""
        if not self.per_stream_s:
            return math.inf
        return max(0, math.floor((ms / 1000 - self.floor_s) / self.per_stream_s))
