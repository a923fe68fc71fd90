"""The engine's frames and the aligner's turns on the fake clock: each step takes a fixed time, side work gets the
turns the engine thread would give (no listener slack: streams start all the time, as at load), a stand-in forward
costs device time per audio-second in slices, and word contexts submit windows due a second later."""
import time

import numpy as np

from aligner import AlignmentService
from engine.core.side_work import SideWork
from fake_clock import FakeClock

FRAME_S = 0.08
PER_AUDIO_S = 0.00022                     # device seconds per audio-second (bench/NOTES.md, the H100)
SLICE_S = 0.0005                          # a slice's fixed device time
SHARES = [0.2, 0.2, 0.15, 0.15, 0.15, 0.15]   # a forward's slices: encoder halves, text-model quarters
GFLOP_S = 7.5e-6                          # device seconds per unit of the weights the stand-in reports
WINDOW = np.zeros(2 * 24000, np.float32)  # every job: 2 s of audio


class Mark:
    """A CUDA event on the fake device: its time."""

    def __init__(self, t: float):
        self.t = t

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: "Mark") -> float:
        return (end.t - self.t) * 1000


class DeviceAligner:
    """align_units in the turns given: a turn starts at the fake clock's time (the engine waits in give() meanwhile)
    and takes its slices' device time; `finished`: when each job's forward ended, by its first unit."""
    slices = len(SHARES)

    def __init__(self, clock: FakeClock):
        self.clock, self.finished = clock, {}

    def align_units(self, items, rate, turn):
        audio_s = sum(len(audio) for audio, _ in items) / rate
        costs, done = [share * PER_AUDIO_S * audio_s for share in SHARES], 0
        while done < len(costs):
            with turn([c / GFLOP_S for c in costs[done:]]) as (count, now):
                start = self.clock.now
                end = start + sum(SLICE_S + c for c in costs[done:done + count])
                done += count
                now.end(Mark(end), Mark(start))
        self.finished.update((units[0], end) for _, units in items)
        return [[(0.0, 0.1)] * len(units) for _, units in items]


class PatientSideWork(SideWork):
    def give(self, after, spare_s=None, budget_s=float("inf")):
        return super().give(after, 30.0, budget_s)    # this loaded test machine's host, not a GPU queue's


class Frames:
    """`step_s`: each engine step's device time; contexts: (start, seconds) each, asking for words at start."""

    def __init__(self, step_s: float):
        self.clock, self.step_s = FakeClock(), step_s
        self.gate = PatientSideWork(timeout_s=30.0, frame_s=FRAME_S)
        self.aligner = DeviceAligner(self.clock)
        self.service = AlignmentService(self.aligner, side_work=self.gate, gather=0, clock=self.clock).start()
        self.step_starts, self.cycle_s = [], step_s
        self.due, self.futures, self.refused = {}, [], []

    def run(self, seconds: float, contexts: list[tuple[float, float]]) -> None:
        """Each context submits a 2 s window every second from 0.5 s in, due a second after it is submitted; then
        the steps go on until every window is aligned (at most 30 s more)."""
        contexts, admitted = sorted(contexts), []
        try:
            while self.clock.now < seconds or not all(f.done() for f in self.futures) and self.clock.now < seconds + 30:
                while contexts and contexts[0][0] <= self.clock.now:
                    start, length = contexts.pop(0)
                    reason = self.service.admit().result()
                    admitted.append((start, length)) if reason is None else self.refused.append(reason)
                for i, (start, length) in enumerate(admitted):
                    k = int(self.clock.now - start - 0.5)
                    if 0 <= k < length and (i, k) not in self.due:
                        self.due[(i, k)] = self.clock.now + 1.0
                        self.futures.append(self.service.submit(WINDOW, [(i, k)], self.clock.now + 1.0))
                self.cycle()
        finally:
            self.service.close()

    def cycle(self) -> None:
        """A step, then a turn of the frame's planned share: the turn supply this harness models (the engine's own
        turns come from the listeners' slack, engine/core/engine_thread.py _offer_turn)."""
        start = self.clock.now
        self.step_starts.append(start)
        self.gate.close()
        self.clock.advance(self.step_s)
        planned = self.gate.planned(self.cycle_s)
        self._settled()
        wanted = self.gate.wanted
        done = self.gate.give(None, max(0.01, planned / 2), planned) if wanted is not None and planned >= wanted \
            else None
        if done is not None:
            self.clock.now = max(self.clock.now, done.t)
        self.cycle_s = 0.9 * self.cycle_s + 0.1 * (self.clock.now - start)     # as engine/core/step.py averages

    def _settled(self) -> None:
        """Until the aligner waits for a turn, or has nothing left to align."""
        deadline = time.monotonic() + 30
        while self.gate.wanted is None and not all(f.done() for f in self.futures):
            assert time.monotonic() < deadline and self.service.thread.is_alive(), "the aligner is stuck"
            time.sleep(0.0005)

    def late(self) -> list:
        return [(job, self.aligner.finished.get(job), due) for job, due in self.due.items()
                if self.aligner.finished.get(job, float("inf")) > due]
