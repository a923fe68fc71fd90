"""Admission under sustained overload on a fake clock, without a GPU: the real Scheduler, Admission, AdmissionQueue
and StepCost; a closed loop of clients that retry `busy` after a round trip; a step whose time is a line in the
running streams (at --max-step-ms near ~1,600 streams, so slots stay free under 2,048); streams that end at a random
frame within the 150 cap, unrelated to their text, as random weights end them. Prints when `busy` came (at once, or
after waiting out --max-queue-ms) and the gauges each few seconds. A diagnostic, not a GPU figure.

python3 bench/queue_sim.py [--clients 2048] [--seconds 40] [--burst N]"""
import argparse
import random
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import EngineInputError, SynthesisRequest  # noqa: E402
from engine.core.admission import Admission  # noqa: E402
from engine.core.scheduler import Scheduler  # noqa: E402
from engine.core.sequence import Sequence, Status  # noqa: E402
from engine.core.step_cost import StepCost  # noqa: E402
from engine.models.base import AudioFormat  # noqa: E402

MODEL = SimpleNamespace(audio=AudioFormat(num_codebooks=1, samples_per_frame=4, sample_rate=50), eos=-1)
VOICE = SimpleNamespace(key="voice", length=16)
BOUND_MS, MAX_ACTIVE, MAX_QUEUE_S, RETRY_S, CAP = 64.0, 2048, 0.5, 0.03, 150    # RETRY_S: the client's round trip
FLOOR_S, PER_STREAM_S, PER_START_S = 0.010, 0.0000335, 0.0002                  # 64 ms at ~1,600 streams
PREFILL_TOKENS = 4096


class Overload:
    def __init__(self, clients: int, burst: bool, seed: int = 0):
        self.rng, self.clients, self.burst = random.Random(seed), clients, burst
        self.cost = StepCost()
        self.admission = Admission(MAX_ACTIVE, 10_000_000, 16, prompt_tokens=lambda seq, ids: 16 + ids,
                                   max_step_ms=BOUND_MS, cost=self.cost)
        self.sched = Scheduler(MODEL, MAX_ACTIVE, PREFILL_TOKENS, SimpleNamespace(release=lambda seq: None),
                               self.admission, PREFILL_TOKENS, MAX_QUEUE_S)
        self.ids, self.ends, self.sent = iter(range(10 ** 9)), {}, {}
        self.busy_after, self.at_once, self.expired, self.samples = [], 0, 0, []

    def context(self, sent: float, first_wave: bool) -> Sequence:
        s = Sequence(next(self.ids), SynthesisRequest(text="Hello there", max_frames=CAP, text_complete=True),
                     SimpleNamespace(deliver=lambda item: None), 0, "", MODEL.audio)
        s.prefix, s.text.feed = VOICE, list(range(self.rng.randint(20, 32)))        # its text settled at once
        self.ends[s] = min(CAP, 1 + int(self.rng.expovariate(1 / 250)))            # ~131 frames on average
        if first_wave and not self.burst:
            s.frames = self.rng.randint(0, self.ends[s] - 1)                        # staggered ages: a steady state
        self.sent[s] = sent
        return s

    def refused(self, s: Sequence, now: float, retries: list) -> None:
        self.busy_after.append(now - self.sent.pop(s) + RETRY_S / 2)
        if not self.burst:
            retries.append(now + RETRY_S)

    def run(self, seconds: float) -> None:
        sched, now, due, sample_at = self.sched, 0.0, [0.0] * self.clients, 1.0
        while now < seconds:
            arriving, due = [t for t in due if t <= now], [t for t in due if t > now]
            for t in arriving:
                s = self.context(t - RETRY_S / 2, first_wave=t == 0.0)
                try:
                    sched.add(s, self.cost.ms, now)
                except EngineInputError:
                    self.at_once += 1
                    self.refused(s, now, due)
            for s, _ in sched.admit_queued(self.cost.ms, now):
                self.expired += 1
                sched.finish(s, "error")
                self.refused(s, now, due)
            started, budget = [], PREFILL_TOKENS
            for s in list(sched.waiting):
                need = 16 + s.text.num_text_ids
                if started and budget < need or not sched.free_slots:
                    break
                budget -= need
                sched.waiting.remove(s)
                s.status, s.slot = Status.RUNNING, sched.free_slots.popleft()
                sched.running.append(s)
                started.append(s)
            step_s = (FLOOR_S + PER_STREAM_S * len(sched.running) + PER_START_S * len(started)) * \
                (1 + 0.03 * self.rng.uniform(-1, 1))
            for s in list(sched.running):
                s.frames += 1
                if s.frames >= self.ends[s]:
                    sched.finish(s, "eos" if s.frames < CAP else "max_frames")
                    self.sent.pop(s, None)
                    if not self.burst:
                        due.append(now + step_s)              # the client opens its next context
            sched.steps, sched.started = sched.steps + 1, len(started)
            now += step_s
            self.cost.observe(step_s, len(sched.running), len(started))
            if now >= sample_at:
                self.samples.append((round(now), sched.num_active, len(sched.queue), round(self.cost.ms, 1)))
                sample_at += 1.0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--clients", type=int, default=2048)
    p.add_argument("--seconds", type=float, default=40.0)
    p.add_argument("--burst", type=int, default=0, help="instead of a closed loop: N clients at once, no retries")
    args = p.parse_args()
    sim = Overload(args.burst or args.clients, bool(args.burst))
    sim.run(args.seconds)
    print("t  active  queue  step_ms")
    for row in sim.samples[::max(1, len(sim.samples) // 12)]:
        print(*row)
    after = np.array(sim.busy_after) * 1000
    print(f"busy: {len(after)} ({sim.at_once} at once, {sim.expired} after waiting out the queue)" +
          (f", after p50 {np.percentile(after, 50):.0f} ms p99 {np.percentile(after, 99):.0f} ms" if len(after) else ""))
    queue = sim.sched.queue
    print(f"queued {queue.queued}, joined from the queue {queue.queued - queue.expired - len(queue)}")


if __name__ == "__main__":
    main()
