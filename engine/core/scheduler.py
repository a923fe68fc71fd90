"""Continuous batching: which waiting sequences join (slots, KV blocks, prefill budget)."""
from collections import deque

from engine.core.admission_queue import AdmissionQueue
from engine.core.sequence import Sequence, Status

LOW_BUFFER_S = 0.3


class Scheduler:
    def __init__(self, max_seqs: int, max_prefill_tokens: int, kv, admission, max_queue_s: float = 0.0):
        self.max_seqs, self.max_prefill_tokens, self.kv, self.admission = max_seqs, max_prefill_tokens, kv, admission
        self.queue = AdmissionQueue(max_queue_s)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.free_slots = deque(range(max_seqs))
        self.steps = self.started = 0
        self.calm_step_ms: float | None = None       # the last step that started no stream, the engine busy
        self.promoted_at: float | None = None

    @property
    def num_active(self) -> int:
        return len(self.waiting) + len(self.running)

    def has_work(self) -> bool:
        return any(s.frame_started or s.text_ready() or s.finish_reason for s in self.running) or self.admitting()

    def holds_audio(self) -> bool:
        return any(s.pending for s in self.running)

    def admitting(self) -> bool:
        return bool(self.free_slots) and any(s.num_text_ids or s.closed for s in self.waiting)

    def slack_s(self, now: float, listening: bool = False) -> float:
        """How long the engine could pause before a listener runs dry."""
        if not listening and self.admitting():
            return 0.0
        ahead = ((s, s.ahead_s(now)) for s in self.running if s.finish_reason is None and
                 (s.first_sent_at is not None or not listening))
        # one waiting for text counts only with audio to play or coming: its first frames make it a listener
        return min((a for s, a in ahead if s.text_ready() or a > 0 or s.unread), default=float("inf"))

    def add(self, seq: Sequence, step_ms: float, now: float = 0.0) -> None:
        step_ms = self.capacity_ms(step_ms)
        why = self.admission.blocker(seq, self.num_active, step_ms)
        if why is None and not self.queue:
            self.admission.take(seq)
            self.waiting.append(seq)
        else:
            self.queue.enter(self, seq, why, step_ms, now)

    def capacity_ms(self, step_ms: float) -> float:
        """The step time admission goes by: the moving average lags a burst's prefills, so the last step, when it
        started no stream, shows at once what the running ones cost."""
        return step_ms if self.started or self.calm_step_ms is None else min(step_ms, self.calm_step_ms)

    def admit_queued(self, step_ms: float, now: float, idled: bool = False) -> list:
        """Once a step (`idled`: the engine waited for work before it): the queue's head joins while there is room;
        returns (seq, error) for those to fail."""
        if self.promoted_at is not None and not self.started and not idled:
            self.calm_step_ms = 1000 * (now - self.promoted_at)
        self.promoted_at = now
        return self.queue.admit(self, self.capacity_ms(step_ms), now) if self.queue else []

    def admit(self, build_prompt, now: float) -> tuple[list[Sequence], list]:
        """A quarter of the prefill budget while a listener runs low: a long prefill would leave it dry."""
        seqs, prompts, tokens = [], [], 0
        budget = self.max_prefill_tokens
        if self.admitting() and self.slack_s(now, listening=True) < LOW_BUFFER_S:
            budget //= 4
        for seq in list(self.waiting):
            if not self.free_slots:
                break
            prompt = build_prompt(seq)
            if prompt is None:
                continue
            n = self.kv.prefill_tokens(prompt)
            if seqs and tokens + n > budget or not self.kv.can_start(prompt):
                break
            self.waiting.remove(seq)
            self.kv.start(seq, prompt)
            seq.slot = self.free_slots.popleft()
            seq.status = Status.RUNNING
            self.running.append(seq)
            seqs.append(seq)
            prompts.append(prompt)
            tokens += n
        self.steps, self.started = self.steps + 1, len(seqs)
        return seqs, prompts

    def requeue(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.free_slots.appendleft(seq.slot)
        self.kv.release(seq)
        seq.status, seq.slot, seq.fed, seq.eos_fed, seq.num_tokens = Status.WAITING, -1, 0, False, 0
        self.waiting.appendleft(seq)

    def finish(self, seq: Sequence, reason: str) -> None:
        if seq.status is Status.FINISHED:
            return
        if self.queue.discard(seq):
            seq.status, seq.finish_reason = Status.FINISHED, reason
            return
        self.queue.ended(seq, reason)
        if seq.status is Status.RUNNING:
            self.running.remove(seq)
            self.free_slots.append(seq.slot)
        else:
            self.waiting.remove(seq)
        self.kv.release(seq)
        self.admission.release(seq)
        seq.status = Status.FINISHED
        seq.finish_reason = reason
