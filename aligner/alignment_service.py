"""The alignment service: one thread batches every context's jobs, most urgent first, and launches their forwards in
turns between the engine's steps (a second reads each batch's results meanwhile); a failed batch is split until only
the job that fails alone loses its words; a new context gets words only while the device time planned for them covers
its demand."""
import contextlib
import logging
import math
import queue
import threading
import time
from collections import deque
from concurrent.futures import Future

from engine.core.clock import REAL_CLOCK

from .device_costs import DeviceCosts
from .finisher import Finisher, InFlight, settle
from .job_queue import JobQueue
from .stream import RATE
from .turns import Turns
from .words_admission import WordsAdmission

log = logging.getLogger("qwen_tts_gateway")
QUEUED_S = 0.5            # a job that waited longer for its batch waited behind other work: the aligner is behind


class AlignmentUnavailable(RuntimeError):
    """A context's words stop, with the reason."""


class AlignmentService:
    def __init__(self, aligner, max_batch: int = 128, max_batch_seconds: float = 384.0, max_queue: int = 1024,
                 side_work=None, gather: float = 0.25, gather_margin: float = 0.6, rate: int = RATE,
                 clock=REAL_CLOCK):
        """`aligner`: anything with align_units(); `side_work`: the engine's turn hook (None: run at once)."""
        self.aligner, self.rate, self.clock = aligner, rate, clock       # rate: the engine's audio, which jobs hold
        self.costs = DeviceCosts(rate, int(max_batch_seconds * rate))
        self.side_work = side_work
        if side_work is not None:
            side_work.attach()              # the plan learns the frame's share before the first job
        self.admission, self.late_s = WordsAdmission(clock), -math.inf
        self.queue = JobQueue(max_batch, max_queue, gather, gather_margin, clock)
        self.thread = threading.Thread(target=self._run, name="aligner", daemon=True)
        self.pipelined = hasattr(aligner, "launch_units")     # else align_units answers at once: finished inline
        self.finisher, self.retries, self.lock = Finisher(self._finished), queue.Queue(), threading.Lock()
        self.close_s = 10.0                       # close() waits this long for each thread
        self.busy_until = 0.0                     # perf_counter up to which busy_seconds counted
        self.stats = dict(batches=0, turns=0, jobs=0, audio_seconds=0.0, busy_seconds=0.0, device_seconds=0.0, failed=0,
                          split=0, rejected=0, refused=0, queued_seconds=0.0, turn_wait_seconds=0.0,
                          overdue_jobs=0, overdue_seconds=0.0, spans=0, spans_past_audio=0, turns_returned=0,
                          turn_host_seconds=0.0)
        self.turns = Turns(side_work, self.costs, self.stats)

    def start(self) -> "AlignmentService":
        self.thread.start()
        self.finisher.start()
        return self

    def submit(self, audio, units: list[str], due: float | None = None) -> Future:
        """-> a Future of the units' spans; `due`: when (monotonic) they are needed."""
        future = Future()
        if not self.queue.put((audio, units, future, due, self.clock.monotonic())):
            self.stats["rejected"] += 1
            future.set_exception(AlignmentUnavailable("the aligner is overloaded (queue full)"))
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
        return self.costs.per_audio_s(self.batch_samples(), self.aligner.slices)

    def batch_samples(self) -> int:
        """Audio a batch may hold; with no plan (on a CPU) the most, whatever the aligner's slices."""
        plan = None if self.side_work is None else self.side_work.plan
        return self.costs.max_samples if plan is None else self.costs.batch_samples(plan.turn_s, self.aligner.slices)

    @property
    def queued(self) -> int:
        return self.queue.queued

    def close(self) -> None:
        if self.thread.is_alive():
            self.queue.stop()
            self.thread.join(timeout=self.close_s)
        closed = AlignmentUnavailable("the aligner closed before the words were aligned")
        unread = [flight.batch for flight in list(self.finisher.flying.values())]
        for item in [item for batch in unread + self._retried() for item in batch]:
            settle(item[2], error=closed)           # left only where the device outlived the wait

    def _run(self) -> None:
        while (batch := self.queue.next_batch(self._ask_turn)) is not None:
            try:
                self._isolated(batch)
            finally:
                self.turns.give_back()
            self._retry()
        self.finisher.close(timeout=self.close_s)   # every launched batch read; a failed read comes back to retry
        self._retry()

    def _ask_turn(self) -> int:
        """Before the cut (an aligner that launches in turns): its first turn. -> the audio the batch may hold."""
        if self.side_work is not None and self.pipelined and self.queue.waiting and not self.queue.stopping:
            self.turns.ask(len(self.queue.waiting[0][2][0]) / self.rate)
        return self.batch_samples()

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
            self.queue.wake()

    def _launch(self, batch: list, queued: list[bool]) -> InFlight:
        """The batch's forward, in the engine's turns, queued on the device (an aligner without launch_units: run)."""
        audio_s = sum(len(audio) for audio, *_ in batch) / self.rate
        items = [(audio, units) for audio, units, *_ in batch]
        taken = []
        t0 = time.perf_counter()
        launch = self.aligner.launch_units if self.pipelined else self.aligner.align_units
        launched = launch(items, self.rate, self.turns.of_batch(taken) if self.side_work else None)
        return InFlight(batch, queued, taken, audio_s, t0, launched)

    def _finish(self, flight: InFlight) -> float:
        """-> how far behind a real-time player the words of its jobs that waited in the queue came."""
        batch = flight.batch
        results = self.aligner.finish(flight.launched) if self.pipelined else flight.launched
        if len(results) != len(batch):
            raise RuntimeError(f"the aligner answered {len(results)} of {len(batch)} jobs")
        now = self.clock.monotonic()
        with self.lock:                        # a retry finishes on the aligner thread beside the finisher
            self._record(flight, results, now)
        # late without a wait (an utterance's opening): the flow, not a backlog
        late = max((now - due - len(audio) / self.rate for (audio, _, _, due, _), waited in zip(batch, flight.queued)
                    if due is not None and waited), default=-math.inf)
        for (_, _, future, *_), result in zip(batch, results):
            settle(future, result)
        return late

    def _record(self, flight: InFlight, results: list, now: float) -> None:
        """A finished batch's counts, and the device costs learnt from its turns."""
        overdue = [now - arrival for _, _, _, due, arrival in flight.batch if due is not None and due <= arrival]
        self.stats["overdue_jobs"] += len(overdue)       # due when submitted (an utterance's opening): to its words
        self.stats["overdue_seconds"] += sum(overdue)
        self.stats["spans"] += sum(map(len, results))
        self.stats["spans_past_audio"] += sum(end > len(audio) / self.rate   # clamped to their window's end
                                              for (audio, *_), spans in zip(flight.batch, results) for _, end in spans)
        taken, audio_s = flight.taken, flight.audio_s
        end = time.perf_counter()             # the time some batch was launching or being read, counted once
        self.stats["busy_seconds"] += max(0.0, end - max(flight.started, self.busy_until))
        self.busy_until = max(self.busy_until, end)
        self.stats["batches"] += 1
        self.stats["turns"] += len(taken)
        self.stats["jobs"] += len(flight.batch)
        self.stats["audio_seconds"] += audio_s
        # a turn's time and the time its holder's work queued beside the step (a batch's mel) outlasted the step
        measured = [(seconds + t.beside_seconds(), gflop, n) for t, gflop, n in taken
                    if (seconds := t.seconds()) is not None]
        for seconds, _, _ in measured:
            self.stats["device_seconds"] += seconds
            self.admission.used(seconds)
        self.costs.learn(measured, audio_s, len(measured) == len(taken))
