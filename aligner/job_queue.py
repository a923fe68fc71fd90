"""The aligner's queue: every context's jobs, most urgent first; a batch gathers a while unless a job is due soon."""
import heapq
import itertools
import math
import queue

RETRY = object()          # wakes the aligner thread for a batch whose results failed to read


class JobQueue:
    def __init__(self, max_batch: int, max_queue: int, gather: float, gather_margin: float, clock):
        """A job: (audio, units, future, due or None, arrival)."""
        self.max_batch, self.max_queue, self.clock = max_batch, max_queue, clock
        self.gather, self.gather_margin = gather, gather_margin
        self.jobs: queue.Queue = queue.Queue()
        self.waiting: list = []                   # heap of (due, arrival, job): the most urgent first
        self.order, self.stopping = itertools.count(), False

    @property
    def queued(self) -> int:
        return self.jobs.qsize() + len(self.waiting)

    def put(self, job) -> bool:
        """False: the queue is full."""
        if self.queued >= self.max_queue:
            return False
        self.jobs.put_nowait(job)
        return True

    def stop(self) -> None:
        self.jobs.put(None)

    def wake(self) -> None:
        self.jobs.put(RETRY)

    def take(self, timeout: float | None = 0.0) -> bool:
        """One queued job into the waiting heap; False: none came, or stop() asked to stop."""
        try:
            item = self.jobs.get(timeout=timeout) if timeout is None or timeout > 0 else self.jobs.get_nowait()
        except queue.Empty:
            return False
        if item is None or item is RETRY:
            self.stopping = self.stopping or item is None
            return False
        heapq.heappush(self.waiting, (math.inf if item[3] is None else item[3], next(self.order), item))
        return True

    def next_batch(self, most_samples) -> list | None:
        """The most urgent jobs, gathered up to `gather` s but never past `gather_margin` before the earliest due;
        None once stopped; [] when woken to retry a batch. `most_samples()`: the audio a batch may hold, asked just
        before the cut (it may wait: the jobs that come meanwhile join the batch)."""
        if not self.waiting and (self.stopping or not self.take(None)):
            return None if self.stopping else []
        until = self.gather_until(self.clock.monotonic())
        while len(self.waiting) <= self.max_batch and not self.stopping:
            if not self.take(min(self.waiting[0][0] - self.gather_margin, until) - self.clock.monotonic()):
                break
        return self.cut(most_samples())

    def gather_until(self, start: float) -> float:
        """A batch whose first job is taken at `start` gathers until then, or `gather_margin` before a job is due."""
        due = self.waiting[0][0] - self.gather_margin
        return start if due == math.inf else min(due, start + self.gather)

    def cut(self, most_samples: int) -> list:
        """The next batch: all queued compete by due time, the most urgent first, within max_batch and the audio."""
        while self.take():
            pass
        batch, samples = [], 0
        while self.waiting and len(batch) < self.max_batch:
            item = self.waiting[0][2]
            if batch and samples + len(item[0]) > most_samples:   # leads the next batch
                break
            heapq.heappop(self.waiting)
            batch.append(item)
            samples += len(item[0])
        return [item for item in batch if item[2].set_running_or_notify_cancel()]   # skip abandoned jobs
