"""What a step costs as the engine measures it: a moving average, and a line from the fastest step through the cost
each stream adds, so admission can project a batch's step before the batch runs."""
import math

import numpy as np

SLOPE_STREAMS = 128     # fewer streams' steps are the floor plus noise: their slope would refuse a burst
FORGET = 0.95           # the fit's memory: about the last 20 steps
FIT_STEPS = 20          # a burst's first steps of many streams fit a line of noise: it would refuse the burst
OUTLIER = 4.0           # a step this many times the average (a capture, a collection) is not the batch's cost
APART = 1e-2            # streams and starts this far from parallel are told apart (1 - their correlation squared)


class StepCost:
    def __init__(self):
        self.s = 0.0                          # moving average, the host work between steps included
        self.floor_s: float | None = None     # the fastest step with streams running
        self.per_stream_s: float | None = None
        self._gram, self._moment = np.zeros((2, 2)), np.zeros(2)
        self.fitted = 0                       # steps of many streams seen

    @property
    def ms(self) -> float:
        return self.s * 1000

    def observe(self, seconds: float, streams: int, started: int) -> None:
        """Steps under churn nearly all start streams, so the fit takes a start's prefill as a term of its own:
        step - floor = per_stream * streams + per_start * started, least squares over the recent steps."""
        outlier = self.fitted and seconds > OUTLIER * self.s
        self.s = 0.9 * self.s + 0.1 * seconds
        if not streams:
            return
        self.floor_s = seconds if self.floor_s is None else min(self.floor_s, seconds)
        if streams < SLOPE_STREAMS or outlier:
            return
        x = np.array([streams, started], float)
        self._gram = FORGET * self._gram + np.outer(x, x)
        self._moment = FORGET * self._moment + x * (seconds - self.floor_s)
        self.fitted += 1
        if self.fitted >= FIT_STEPS:
            self.per_stream_s = self._fit()

    def _fit(self) -> float:
        """Both terms where streams and starts vary apart and neither comes out negative; else the streams alone."""
        g, m = self._gram, self._moment
        if np.linalg.det(g) > APART * g[0, 0] * g[1, 1] > 0:
            per_stream, per_start = np.linalg.solve(g, m)
            if per_stream >= 0 and per_start >= 0:
                return float(per_stream)
        return float(m[0] / g[0, 0])

    def streams_within(self, ms: float) -> float:
        """How many streams the line keeps a step within `ms`: unbounded before FIT_STEPS steps of many streams,
        and never fewer than it can still learn from (below, the moving average guards alone)."""
        per_stream, floor = self.per_stream_s, self.floor_s       # read beside the engine thread (stats)
        if not per_stream:
            return math.inf
        return max(SLOPE_STREAMS, math.floor((ms / 1000 - floor) / per_stream))
