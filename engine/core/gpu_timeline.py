"""Where the device's time goes under load, with no sync: CUDA events around each stage of a step, read once done.
Moving averages in ms: each stage, `step` (the main stream's span: its first stage's start to its last end) and `idle`
(the main stream's gap before the step: the host not ahead). A side stream's stage (the decode) overlaps the next
step's, so it counts only as itself: with it, a span would add the overlap to the step."""
from collections import deque
from contextlib import contextmanager

import torch

NEWEST = 0.05          # the newest step's weight in the averages
BUSY_GAP_MS = 100      # a longer gap before a step is the engine without work, not a bubble


class GpuTimeline:
    def __init__(self, on: bool, event=lambda: torch.cuda.Event(enable_timing=True)):
        self.on, self.event = on, event
        self.done_steps: deque = deque()      # per step, its (stage, start, end) events, recorded and not read yet
        self.marks: list = []
        self.last_end = None
        self.ms: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str, side: bool = False):
        """On the current stream: a stage's work launched inside; `side`: not the main stream."""
        if not self.on:
            yield
            return
        start = self.event()
        start.record()
        yield
        end = self.event()
        end.record()
        self.marks.append((name, start, end, side))

    def drop_step(self) -> None:
        """A failed step's stages: never read, so they do not merge into the next step's."""
        self.marks = []

    def end_step(self) -> None:
        if self.marks:
            self.done_steps.append(self.marks)
            self.marks = []
        while self.done_steps and all(end.query() for _, _, end, _ in self.done_steps[0]):
            self._read(self.done_steps.popleft())

    def _read(self, marks: list) -> None:
        per_stage: dict[str, float] = {}
        for name, start, end, _ in marks:
            per_stage[name] = per_stage.get(name, 0.0) + start.elapsed_time(end)
        main = [(start, end) for _, start, end, side in marks if not side]
        if main:
            first = main[0][0]
            last = max((end for _, end in main), key=first.elapsed_time)
            per_stage["step"] = first.elapsed_time(last)
            gap = self.last_end.elapsed_time(first) if self.last_end is not None else BUSY_GAP_MS
            if gap < BUSY_GAP_MS:
                per_stage["idle"] = max(0.0, gap)
            self.last_end = last
        for name, ms in per_stage.items():
            self.ms[name] = ms if name not in self.ms else (1 - NEWEST) * self.ms[name] + NEWEST * ms
        for name in self.ms.keys() - per_stage.keys():         # a stage this step did not run took no time
            self.ms[name] *= 1 - NEWEST
