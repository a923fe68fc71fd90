"""After a failed step, bisect the streams to end only the one(s) that made it fail; server faults end all."""
from collections import deque

import torch

from engine.api.request import EngineInputError
from engine.core.sequence import Sequence, Status

SERVER_FAULTS = (torch.OutOfMemoryError, getattr(torch, "AcceleratorError", torch.OutOfMemoryError))


class FaultIsolation:
    def __init__(self, scheduler):
        self.scheduler = scheduler
        self.groups: deque[list[Sequence]] = deque()
        self.probing: list[Sequence] | None = None

    def run(self, step) -> None:
        sched = self.scheduler
        while self.groups and not any(s.status is not Status.FINISHED for s in self.groups[0]):
            self.groups.popleft()
        if not self.groups:
            return step()
        group = self.probing = self.groups[0]
        running, waiting = sched.running, sched.waiting
        sched.running = [s for s in running if s in group]
        sched.waiting = deque(s for s in waiting if s in group)
        try:
            step()
        finally:
            sched.running = sched.running + [s for s in running if s not in group]
            sched.waiting.extend(s for s in waiting if s not in group)
        self.groups.popleft()
        self.probing = None

    def failed(self, exc: Exception) -> list[tuple[Sequence, Exception]]:
        sched, group = self.scheduler, self.probing
        self.probing = None
        everyone = list(sched.running) + list(sched.waiting)
        if isinstance(exc, SERVER_FAULTS):
            self.groups.clear()
            return [(s, exc) for s in everyone]
        if group is None:
            group = everyone
        else:
            self.groups.popleft()
        group = [s for s in group if s.status is not Status.FINISHED]
        if len(group) == 1:
            return [(group[0], EngineInputError("generation_failed", f"this request made the engine's step fail "
                                                f"({type(exc).__name__}: {exc}); it was ended, the others go on"))]
        half = len(group) // 2
        self.groups.extendleft([group[half:], group[:half]])
        return []
