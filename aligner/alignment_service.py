"""The alignment worker: one thread batches every context's jobs, run in turns between the engine's steps."""
import contextlib
import queue
import threading
import time
from concurrent.futures import Future

from .stream import RATE


class AlignmentUnavailable(RuntimeError):
    pass


class AlignmentService:
    def __init__(self, aligner, max_batch: int = 128, max_batch_seconds: float = 384.0, max_queue: int = 1024,
                 side_work=None, gather: float = 0.25, gather_margin: float = 0.6):
        """`aligner`: anything with align_units(); `side_work`: the engine's turn hook (None: run at once)."""
        self.aligner, self.max_batch, self.max_samples = aligner, max_batch, int(max_batch_seconds * RATE)
        self.side_work, self.gather, self.gather_margin = side_work, gather, gather_margin
        self.fixed_s, self.per_gflop_s = 0.0005, 6e-6     # a turn's device time: learnt from the turns taken
        self.jobs: queue.Queue = queue.Queue(max_queue)
        self.later = None                         # the job that did not fit the last batch
        self.thread = threading.Thread(target=self._run, name="aligner", daemon=True)
        self.stats = dict(batches=0, turns=0, jobs=0, audio_seconds=0.0, busy_seconds=0.0, device_seconds=0.0, failed=0,
                          rejected=0, queued_seconds=0.0, turn_wait_seconds=0.0)

    def start(self) -> "AlignmentService":
        self.thread.start()
        return self

    def submit(self, audio, units: list[str], due: float | None = None) -> Future:
        """-> a Future of the units' spans; `due`: when (monotonic) they are needed."""
        future = Future()
        try:
            self.jobs.put_nowait((audio, units, future, due, time.monotonic()))
        except queue.Full:
            self.stats["rejected"] += 1
            future.set_exception(AlignmentUnavailable("the aligner is overloaded (queue full)"))
        return future

    def close(self) -> None:
        if self.thread.is_alive():
            self.jobs.put(None)
            self.thread.join(timeout=10)

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            self._align(batch)

    def _next_batch(self) -> list | None:
        first, self.later = self.later or self.jobs.get(), None
        if first is None:
            return None
        batch, samples, due, start = [first], len(first[0]), first[3], time.monotonic()
        while len(batch) < self.max_batch:
            now = time.monotonic()
            wait = 0.0 if due is None else min(due - self.gather_margin, start + self.gather) - now
            try:
                item = self.jobs.get(timeout=wait) if wait > 0 else self.jobs.get_nowait()
            except queue.Empty:
                break
            if item is None:                      # stop after this batch
                self.jobs.put(None)
                break
            if samples + len(item[0]) > self.max_samples:   # first of the next batch
                self.later = item
                break
            batch.append(item)
            samples += len(item[0])
            due = None if due is None or item[3] is None else min(due, item[3])
        return [item for item in batch if item[2].set_running_or_notify_cancel()]   # skip abandoned jobs

    def _align(self, batch: list) -> None:
        if not batch:
            return
        audio_s = sum(len(audio) for audio, *_ in batch) / RATE
        self.stats["queued_seconds"] += sum(time.monotonic() - item[4] for item in batch)
        items = [(audio, units) for audio, units, *_ in batch]
        taken = []

        @contextlib.contextmanager
        def turn(weights: list[float]):           # the aligner asks once its host work is done
            costs, asked = [self.fixed_s + self.per_gflop_s * w for w in weights], time.monotonic()
            with self.side_work.turn(costs[0]) as t:
                self.stats["turn_wait_seconds"] += time.monotonic() - asked
                count = fitting(costs, t.budget_s)
                taken.append((t, sum(weights[:count])))
                yield count, t
        t0 = time.perf_counter()
        try:
            results = self.aligner.align_units(items, RATE, turn if self.side_work else None)
            spent = [(t.seconds(), gflop) for t, gflop in taken]
        except Exception as exc:
            self.stats["failed"] += len(batch)
            for _, _, future, *_ in batch:
                future.set_exception(AlignmentUnavailable(f"alignment failed: {exc.__class__.__name__}: {exc}"))
            return
        self.stats["busy_seconds"] += time.perf_counter() - t0
        self.stats["batches"] += 1
        self.stats["turns"] += len(taken)
        self.stats["jobs"] += len(batch)
        self.stats["audio_seconds"] += audio_s
        for seconds, gflop in spent:
            if seconds is not None:
                self.stats["device_seconds"] += seconds
                self.per_gflop_s = 0.8 * self.per_gflop_s + 0.2 * max(0.0, seconds - self.fixed_s) / max(gflop, 1e-3)
        for (_, _, future, *_), result in zip(batch, results):
            future.set_result(result)


def fitting(costs: list[float], budget: float) -> int:
    n, total = 1, costs[0]
    while n < len(costs) and total + costs[n] <= budget:
        total, n = total + costs[n], n + 1
    return n
