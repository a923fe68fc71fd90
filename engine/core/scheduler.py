"""Continuous batching: the one writer of a stream's step state. It plans each step (who joins, who draws a frame,
who talks), applies the step's results, and ends streams."""
from collections import deque

from engine.core.admission_queue import AdmissionQueue
import numpy as np

from engine.api.request import AudioChunk, EngineInputError, UnjoinedChunk
from engine.core.plan import Plan, Talk
from engine.core.sequence import Sequence, Status
from engine.models.sampling import FAULT

LOW_BUFFER_S = 0.3


class KVCacheFull(RuntimeError):
    """A stream needed a KV block when none was free: it ends; the others go on."""


class Scheduler:
    def __init__(self, model, max_active: int, max_prefill_tokens: int, kv, admission, max_context: int,
                 max_queue_s: float = 0.0):
        self.model, self.max_active, self.max_prefill_tokens = model, max_active, max_prefill_tokens
        self.kv, self.admission, self.max_context = kv, admission, max_context
        self.queue = AdmissionQueue(max_queue_s)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.free_slots = deque(range(max_active))
        self.steps = self.started = 0
        self.calm_step_ms: float | None = None       # the last step that started no stream, the engine busy
        self.promoted_at: float | None = None

    @property
    def max_prompt(self) -> int:
        return min(self.max_context, (self.kv.num_blocks - 1) * self.kv.block_size) - 1

    @property
    def num_active(self) -> int:
        return len(self.waiting) + len(self.running)

    def has_work(self) -> bool:
        return any(s.frame_started or s.text.ready() or s.finish_reason for s in self.running) or self.admitting()

    def holds_audio(self) -> bool:
        return any(s.playout.unsent for s in self.running)

    def admitting(self) -> bool:
        return bool(self.free_slots) and any(s.text.num_text_ids or s.text.closed for s in self.waiting)

    def starting(self) -> bool:
        """A stream whose first audio a pause would delay: one joining, or one whose listener has not started."""
        return self.admitting() or any(not s.playout.listener.started and s.finish_reason is None
                                       for s in self.running)

    def slack_s(self, now: float, listening: bool = False) -> float:
        """How long the engine could pause before a listener runs dry."""
        if not listening and self.admitting():
            return 0.0
        ahead = ((s, s.playout.ahead_s(now)) for s in self.running if s.finish_reason is None and
                 (s.playout.listener.started or not listening))
        # one waiting for text counts only with audio to play or coming: its first frames make it a listener
        return min((a for s, a in ahead if s.text.ready() or a > 0 or s.playout.unread), default=float("inf"))

    def add(self, seq: Sequence, step_ms: float, now: float = 0.0) -> None:
        seq.arrived_at = now
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

    def schedule(self, plan: Plan, now: float) -> Plan:
        """Who joins, after schedule_talk, and who draws the rest of a frame: the talkers and the joiners. A joiner
        whose prompt is one talk row rides the talk. A quarter of the prefill budget while a listener runs low: a long
        prefill would leave it dry."""
        ready, tokens = [s for s in self.running if s.frame_started], 0
        budget = self.max_prefill_tokens
        if self.admitting() and self.slack_s(now, listening=True) < LOW_BUFFER_S:
            budget //= 4
        for seq in list(self.waiting):
            if not self.free_slots:
                break
            prompt = self.model.prompt(seq)
            if prompt is None:
                continue
            if prompt.length > self.max_prompt:
                plan.rejected.append((seq, EngineInputError("text_too_long", f"the prompt ({prompt.length} tokens) "
                                      f"exceeds the {self.max_prompt} tokens a stream can start with")))
                continue
            n = self.kv.prefill_tokens(prompt)
            if plan.admitted and tokens + n > budget or not self.kv.can_start(prompt):
                break
            self.waiting.remove(seq)
            self.kv.start(seq, prompt)
            seq.slot = self.free_slots.popleft()
            seq.status = Status.RUNNING
            seq.text.fed, seq.text.eos_fed = prompt.consumed, prompt.eos_consumed
            seq.frames_started, seq.frame_started = 1, True     # the prefill draws the first frame's first code
            self.running.append(seq)
            plan.admitted.append(seq)
            plan.prompts.append(prompt)
            if prompt.talk_id is not None:
                plan.talk.add(seq, prompt.talk_id, seq.kv.num_tokens - 1, False)
            tokens += n
        self.steps, self.started = self.steps + 1, len(plan.admitted)
        plan.ready = ready + plan.admitted
        return plan

    def update(self, plan: Plan, talked: list[Sequence], ids: list[int]) -> list[bool]:
        """The step's results: the previous talk's first codes (EOS ends a stream's frames, a fault the stream)
        and the frames decoded. Returns which of `plan.ready` made a frame."""
        for seq, error in plan.rejected:
            self.finish(seq, "error", error)
        self.apply_talk(talked, ids)
        kept = []
        for s in plan.ready:
            s.frame_started = False
            kept.append(s.finish_reason is None)              # an EOS stream's frame was not a frame
            if kept[-1]:
                s.frames += 1
                if s.frames >= s.max_frames:
                    s.finish_reason = "max_frames" if s.request.max_frames is not None else "length"
        return kept

    def apply_talk(self, talked: list[Sequence], ids: list[int]) -> None:
        """A talk's first codes: EOS ends a stream's frames, a fault the stream."""
        for s, c in zip(talked, ids):
            if s.status is not Status.RUNNING:
                continue
            if c == self.model.eos:
                s.frame_started = False
                s.finish_reason = "eos"
            elif c == FAULT:
                self.finish(s, "error", EngineInputError("generation_failed", "the model's output for this "
                            "request went non-finite (NaN/Inf); it was ended, other streams go on"))

    def schedule_talk(self, plan: Plan) -> Talk:
        """Who feeds a text id and draws the next frame's first code (before the step's joiners); a KV block each
        may need. What it takes is kept in `talk.undo` until the talk is launched."""
        talk, kv, max_context, pad, eos = plan.talk, self.kv, self.max_context, self.model.text_pad, self.model.text_eos
        for s in self.running:
            if s.frame_started or s.finish_reason:
                continue
            if s.kv.num_tokens + 1 > max_context:
                s.finish_reason = "length"
                continue
            if not kv.room_for_one(s):
                talk.stalled.append(s)
                continue
            if not s.text.ready():
                continue
            talk.undo.append((s, s.text.fed, s.text.eos_fed))
            talk.add(s, s.text.next_id(pad, eos), s.kv.num_tokens, s.eos_allowed)
            kv.append(s, 1)
            s.frames_started += 1
            s.frame_started = True
        # no stream can free a block (one whose frames are done frees its own once its audio is out): the youngest
        # gives its own
        if talk.stalled and not talk.seqs and not any(s.finish_reason for s in self.running):
            victim = talk.stalled[-1]
            self.finish(victim, "error", KVCacheFull(f"the KV cache is full ({victim.kv.num_tokens} tokens in this "
                                                     "stream); retry"))
        return talk

    def untalk(self, talk: Talk) -> None:
        """A talk that never ran (its step failed first): its talkers give back the text id and the KV token."""
        for s, fed, eos_fed in talk.undo:
            if s.status is Status.RUNNING:
                s.text.fed, s.text.eos_fed = fed, eos_fed
                s.kv.num_tokens -= 1
                s.frames_started -= 1
                s.frame_started = False
        talk.undo.clear()

    def requeue(self, seq: Sequence) -> None:
        """Admitted, its prompt not prefilled: it waits again."""
        self.running.remove(seq)
        self.free_slots.appendleft(seq.slot)
        self.kv.release(seq)
        seq.status, seq.slot, seq.frames_started, seq.frame_started = Status.WAITING, -1, 0, False
        seq.text.fed, seq.text.eos_fed = 0, False
        self.waiting.appendleft(seq)

    def finish(self, seq: Sequence, reason: str,
               last: AudioChunk | UnjoinedChunk | Exception | None = None) -> None:
        """The one way a stream ends (its audio sent, cancelled, or failed): its slot, KV and reservation are freed,
        then `last` (its final chunk or error; by default an empty final chunk) is delivered."""
        if seq.status is Status.FINISHED:
            return
        if not self.queue.discard(seq):          # a queued one holds nothing yet
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
        if last is None:
            audio = self.model.audio
            last = AudioChunk(np.zeros(0, np.float32), np.zeros((0, audio.num_codebooks), np.int64), seq.frames,
                              seq.frames * audio.samples_per_frame, True, reason)
        seq.handle.deliver(last)
