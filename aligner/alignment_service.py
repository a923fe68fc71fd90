"""The alignment service: one thread batches every context's jobs, most urgent first, and launches their forwards in
turns between the engine's steps (a second reads each batch's results meanwhile); a failed batch is split until only
the job that fails alone loses its words; a new context gets words only while the device time planned for them covers
its demand."""
import contextlib
import heapq
import itertools
import logging
import math
import queue
import threading
import time
from collections import deque
from concurrent.futures import Future

from engine.core.clock import REAL_CLOCK

from .finisher import Finisher, InFlight, settle
from .stream import RATE
from .words_admission import WordsAdmission

log = logging.getLogger("qwen_tts_gateway")
TURNS = 2.5               # a batch's forward spans about this many planned turns (its first slice, up to 30%, fits one)
QUEUED_S = 0.5            # a job that waited longer for its batch waited behind other work: the aligner is behind
RETRY = object()          # wakes the aligner thread for a batch whose results failed to read


class AlignmentUnavailable(RuntimeError):
    """A context's words stop, with the reason."""


class AlignmentService:
    def __init__(self, aligner, max_batch: int = 128, max_batch_seconds: float = 384.0, max_queue: int = 1024,
                 side_work=None, gather: float = 0.25, gather_margin: float = 0.6, rate: int = RATE,
                 clock=REAL_CLOCK):
        """`aligner`: anything with align_units(); `side_work`: the engine's turn hook (None: run at once)."""
        self.aligner, self.max_batch, self.max_samples = aligner, max_batch, int(max_batch_seconds * rate)
        self.rate, self.clock = rate, clock       # the engine's audio, which the jobs hold
        self.side_work, self.gather, self.gather_margin = side_work, gather, gather_margin
        if side_work is not None:
            side_work.attach()              # the plan learns the frame's share before the first job
        self.fixed_s, self.per_gflop_s = 0.0005, 6e-6     # a slice's device time: learnt from the turns taken
        self.marginal_s = 0.0002                  # device seconds per aligned audio-second past the slices' fixed
        self.admission, self.late_s = WordsAdmission(clock), -math.inf
        self.jobs: queue.Queue = queue.Queue()
        self.max_queue = max_queue
        self.waiting: list = []                   # heap of (due, arrival, job): the most urgent first
        self.order, self.stopping = itertools.count(), False
        self.thread = threading.Thread(target=self._run, name="aligner", daemon=True)
        self.pipelined = hasattr(aligner, "launch_units")     # else align_units answers at once: finished inline
        self.finisher, self.retries, self.lock = Finisher(self._finished), queue.Queue(), threading.Lock()
        self.close_s = 10.0                       # close() waits this long for each thread
        self.busy_until = 0.0                     # perf_counter up to which busy_seconds counted
        self.stats = dict(batches=0, turns=0, jobs=0, audio_seconds=0.0, busy_seconds=0.0, device_seconds=0.0, failed=0,
                          split=0, rejected=0, refused=0, queued_seconds=0.0, turn_wait_seconds=0.0)

    def start(self) -> "AlignmentService":
        self.thread.start()
        self.finisher.start()
        return self

    def submit(self, audio, units: list[str], due: float | None = None) -> Future:
        """-> a Future of the units' spans; `due`: when (monotonic) they are needed."""
        future = Future()
        if self.queued >= self.max_queue:
            self.stats["rejected"] += 1
            future.set_exception(AlignmentUnavailable("the aligner is overloaded (queue full)"))
        else:
            self.jobs.put_nowait((audio, units, future, due, self.clock.monotonic()))
        return future

    def admit(self) -> Future:
        """-> a Future of None (a new context gets words) or the reason it gets none; from submit()'s thread. Without
        a plan (on a CPU) every context gets words, bounded by the aligner timeout."""
        future = Future()
        if self.side_work is None or self.side_work.plan is None:
            future.set_result(None)
            return future
        future.set_result(self.admission.admit(self.cost_per_audio_s(), self.side_work.plan.capacity,
                                               self.late_s if self.queued else -math.inf))
        if future.result():
            self.stats["refused"] += 1
        return future

    def cost_per_audio_s(self) -> float:
        """Device seconds a second of audio costs, at full batches."""
        return self.marginal_s + self.aligner.slices * self.fixed_s * self.rate / max(self._batch_samples(), 1)

    @property
    def queued(self) -> int:
        return self.jobs.qsize() + len(self.waiting)

    def close(self) -> None:
        if self.thread.is_alive():
            self.jobs.put(None)
            self.thread.join(timeout=self.close_s)
        closed = AlignmentUnavailable("the aligner closed before the words were aligned")
        unread = [flight.batch for flight in list(self.finisher.flying.values())]
        for item in [item for batch in unread + self._retried() for item in batch]:
            settle(item[2], error=closed)           # left only where the device outlived the wait

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            self._isolated(batch)
            self._retry()
        self.finisher.close(timeout=self.close_s)   # every launched batch read; a failed read comes back to retry
        self._retry()

    def _retry(self) -> None:
        """Batches whose results failed to read, halved and run here (one thread runs the forwards), read inline."""
        for batch, exc in self._retried():
            self._tries(deque(self._split(batch, exc)))

    def _retried(self) -> list:
        out = []
        with contextlib.suppress(queue.Empty):
            while True:
                out.append(self.retries.get_nowait())
        return out

    def _take(self, timeout: float | None = 0.0) -> bool:
        """One queued job into the waiting heap (most urgent first); False: none came, or close() asked to stop."""
        try:
            item = self.jobs.get(timeout=timeout) if timeout is None or timeout > 0 else self.jobs.get_nowait()
        except queue.Empty:
            return False
        if item is None or item is RETRY:
            self.stopping = self.stopping or item is None
            return False
        heapq.heappush(self.waiting, (math.inf if item[3] is None else item[3], next(self.order), item))
        return True

    def _next_batch(self) -> list | None:
        """The most urgent jobs, gathered up to `gather` s but never past `gather_margin` before the earliest due."""
        if not self.waiting and (self.stopping or not self._take(None)):
            return None if self.stopping else []              # []: woken to retry a batch
        until = self.gather_until(self.clock.monotonic())
        while len(self.waiting) <= self.max_batch and not self.stopping:
            if not self._take(min(self.waiting[0][0] - self.gather_margin, until) - self.clock.monotonic()):
                break
        return self.cut()

    def gather_until(self, start: float) -> float:
        """A batch whose first job is taken at `start` gathers until then, or `gather_margin` before a job is due."""
        due = self.waiting[0][0] - self.gather_margin
        return start if due == math.inf else min(due, start + self.gather)

    def cut(self) -> list:
        """The next batch: all queued compete by due time, the most urgent first, within max_batch and the audio."""
        while self._take():
            pass
        batch, samples, most = [], 0, self._batch_samples()
        while self.waiting and len(batch) < self.max_batch:
            item = self.waiting[0][2]
            if batch and samples + len(item[0]) > most:   # leads the next batch
                break
            heapq.heappop(self.waiting)
            batch.append(item)
            samples += len(item[0])
        return [item for item in batch if item[2].set_running_or_notify_cancel()]   # skip abandoned jobs

    def _batch_samples(self) -> int:
        """Audio a batch may hold: its forward within TURNS turns as the engine plans them (larger batches spread the
        slices' fixed time; a job waits for one batch before its own)."""
        if self.side_work is None or self.side_work.plan is None:
            return self.max_samples
        forward = TURNS * self.side_work.plan.turn_s - self.aligner.slices * self.fixed_s
        seconds = max(forward, 0.0) / self.marginal_s
        return int(min(self.max_samples, seconds * self.rate))

    def _isolated(self, batch: list) -> None:
        """A failed batch is halved and retried until the job that fails alone is found: only it loses its words.
        Pipelined, its first try, once launched, is read on the finisher's thread (a failed read comes back here)."""
        if not batch:                                             # every job abandoned
            return
        waits = [self.clock.monotonic() - item[4] for item in batch]
        self.stats["queued_seconds"] += sum(waits)              # once, not again for each retried half
        self._tries(deque([batch]), self.pipelined)

    def _tries(self, groups: deque, pipelined: bool = False) -> None:
        late = []
        while groups:
            group = groups.popleft()
            start = self.clock.monotonic()                        # a retried half waited behind the failed try
            try:
                flight = self._launch(group, [start - item[4] > QUEUED_S for item in group])
                if pipelined:
                    self.finisher.put(flight)
                else:
                    late.append(self._finish(flight))
            except Exception as exc:
                groups.extendleft(reversed(self._split(group, exc)))
            pipelined = False                                     # retried halves are read inline
        if late:
            self.late_s = max(late)

    def _split(self, group: list, exc: Exception) -> list:
        """-> the halves of a failed group to retry; a job that failed alone gets the reason."""
        reason = f"alignment failed: {exc.__class__.__name__}: {exc}"
        if len(group) == 1:
            self.stats["failed"] += 1
            settle(group[0][2], error=AlignmentUnavailable(reason))
            return []
        self.stats["split"] += 1
        log.info("aligner: a batch of %d jobs failed (%s); retried in halves", len(group), reason)
        return [group[:len(group) // 2], group[len(group) // 2:]]

    def _finished(self, flight: InFlight) -> None:
        """The finisher's end of a pipelined batch: its words, or the batch back to the aligner thread to retry."""
        try:
            self.late_s = self._finish(flight)
        except Exception as exc:
            self.retries.put((flight.batch, exc))
            self.jobs.put(RETRY)

    def _launch(self, batch: list, queued: list[bool]) -> InFlight:
        """The batch's forward, in the engine's turns, queued on the device (an aligner without launch_units: run)."""
        audio_s = sum(len(audio) for audio, *_ in batch) / self.rate
        items = [(audio, units) for audio, units, *_ in batch]
        taken = []

        @contextlib.contextmanager
        def turn(weights: list[float]):           # the aligner asks once its host work is done
            costs, asked = [self.fixed_s + self.per_gflop_s * w for w in weights], time.monotonic()
            with self.side_work.turn(costs[0]) as t:
                self.stats["turn_wait_seconds"] += time.monotonic() - asked
                count = max(1, sum(total <= t.budget_s for total in itertools.accumulate(costs)))   # at least one
                taken.append((t, sum(weights[:count]), count))
                yield count, t
        t0 = time.perf_counter()
        launch = self.aligner.launch_units if self.pipelined else self.aligner.align_units
        launched = launch(items, self.rate, turn if self.side_work else None)
        return InFlight(batch, queued, taken, audio_s, t0, launched)

    def _finish(self, flight: InFlight) -> float:
        """-> how far behind a real-time player the words of its jobs that waited in the queue came."""
        batch = flight.batch
        results = self.aligner.finish(flight.launched) if self.pipelined else flight.launched
        if len(results) != len(batch):
            raise RuntimeError(f"the aligner answered {len(results)} of {len(batch)} jobs")
        with self.lock:                        # a retry finishes on the aligner thread beside the finisher
            self._record(flight)
        now = self.clock.monotonic()            # late without a wait (an utterance's opening): the flow, not a backlog
        late = max((now - due - len(audio) / self.rate for (audio, _, _, due, _), waited in zip(batch, flight.queued)
                    if due is not None and waited), default=-math.inf)
        for (_, _, future, *_), result in zip(batch, results):
            settle(future, result)
        return late

    def _record(self, flight: InFlight) -> None:
        """A finished batch's counts, and the device costs learnt from its turns."""
        taken, audio_s = flight.taken, flight.audio_s
        end = time.perf_counter()             # the time some batch was launching or being read, counted once
        self.stats["busy_seconds"] += max(0.0, end - max(flight.started, self.busy_until))
        self.busy_until = max(self.busy_until, end)
        self.stats["batches"] += 1
        self.stats["turns"] += len(taken)
        self.stats["jobs"] += len(flight.batch)
        self.stats["audio_seconds"] += audio_s
        measured = [(seconds, gflop, n) for t, gflop, n in taken if (seconds := t.seconds()) is not None]
        for seconds, gflop, n in measured:
            self.stats["device_seconds"] += seconds
            self.admission.used(seconds)
            self.per_gflop_s = 0.8 * self.per_gflop_s + 0.2 * max(0.0, seconds - n * self.fixed_s) / max(gflop, 1e-3)
        if measured and len(measured) == len(taken):
            spent, fixed = sum(m[0] for m in measured), self.fixed_s * sum(m[2] for m in measured)
            self.marginal_s = 0.8 * self.marginal_s + 0.2 * max(spent - fixed, 0.0) / max(audio_s, 1e-3)
