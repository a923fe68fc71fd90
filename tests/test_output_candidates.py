"""AudioOut checks only the streams its slot arrays say may send: over random frames, clocks, step times, chunk
sizes and ends, it delivers exactly the chunks that checking every stream at every step delivers."""
import random
from types import SimpleNamespace

import numpy as np

from engine.core.output import AudioOut
from engine.core.playout import Playout
from engine.models.base import AudioFormat
from fake_clock import FakeClock

AUDIO = AudioFormat(num_codebooks=2, samples_per_frame=4, sample_rate=50)     # 80 ms frames


class Copy:
    def __init__(self, n: int, step: int):
        self.arrays = [np.full((n, 2), step, np.int64), np.full((n, 4), step, np.float32)]

    def wait(self):
        return self.arrays

    def ready(self):                  # a device still decoding: the newest may be kept a step
        return False


class Scheduler:
    def __init__(self, streams):
        self.max_active, self.running, self.ended = 16, list(streams), []

    def admitting(self) -> bool:
        return False

    def finish(self, s, reason, chunk) -> None:
        self.running.remove(s)
        self.ended.append((s.slot, chunk.frame_offset if chunk else s.frames, True))     # None: an empty end


def run(seed: int, check_all: bool) -> list:
    rng, clock, sent = random.Random(seed), FakeClock(), []
    streams = [SimpleNamespace(slot=i, frames=0, finish_reason=None, arrived_at=0.0, started_at=0.0,
                               text=SimpleNamespace(ready=lambda: True),
                               playout=Playout(rng.choice([(1, 2, 4, 8, 16), (3,), (2, 5)]), rng.random() < 0.8, AUDIO))
               for i in range(16)]
    for s in streams:
        s.handle = SimpleNamespace(deliver=lambda c, s=s: sent.append((s.slot, c.frame_offset, len(c.frames),
                                                                       [f[0][0] for f in c.frames], c.sent_at)))
    sched = Scheduler(streams)
    out = AudioOut(sched, AUDIO, clock, read_later_from=rng.choice([1, 64]))
    out.start(streams)
    if check_all:
        out._candidates = lambda now, margin: list(sched.running)
    for step in range(120):
        clock.advance(rng.choice([0.03, 0.064, 0.08, 0.12]))
        ready = [s for s in sched.running if s.finish_reason is None and rng.random() < 0.9]
        kept = [rng.random() < 0.95 for _ in ready]
        for s, k in zip(ready, kept):
            s.frames += k
            if rng.random() < 0.02:
                s.finish_reason = "eos"
        out.add(ready, kept, Copy(len(ready), step))
        out.flush(rng.choice([0.02, 0.05, 0.1]), rng.choice([0, 0, 2]))
        if step % 7 == 0:
            out.send(0.3, heard_only=True)
    return sent + sched.ended


def test_the_streams_skipped_are_those_that_would_not_have_sent():
    for seed in range(20):
        assert run(seed, check_all=False) == run(seed, check_all=True), seed


def test_a_flush_before_a_side_turn_sends_the_older_frames_and_leaves_the_newest_to_the_steps_end():
    clock, sent = FakeClock(), []
    streams = [SimpleNamespace(slot=i, frames=0, finish_reason=None, arrived_at=0.0, started_at=0.0,
                               text=SimpleNamespace(ready=lambda: True), playout=Playout((1,), True, AUDIO))
               for i in range(2)]
    for s in streams:
        s.handle = SimpleNamespace(deliver=lambda c, s=s: sent.append((s.slot, [f[0][0] for f in c.frames])))
    out = AudioOut(Scheduler(streams), AUDIO, clock, read_later_from=1)    # every batch may read a step late
    out.start(streams)
    for step in range(2):
        for s in streams:
            s.frames += 1
        out.add(streams, [True, True], Copy(2, step))
    out.flush(0.02, 0, final=False)                      # within the step: step 0's frames go, step 1's stay
    assert sorted(sent) == [(0, [0]), (1, [0])] and len(out.in_flight) == 1 and out.fresh
    out.flush(0.02, 0)                                   # the step's end weighs the newest again: still decoding
    assert len(out.in_flight) == 1 and not out.fresh and len(sent) == 2
    out.flush(0.02, 0)                                   # a step later it goes, ready or not
    assert not out.in_flight and sorted(sent)[-1] == (1, [1]) and len(sent) == 4
