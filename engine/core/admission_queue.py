"""Contexts that cannot join yet wait here, in order, while the engine expects room for them within --max-queue-ms;
`busy` at once when it does not, or once a context has waited that long. Their text is settled once they join
(hundreds waiting under overload cost the engine thread ~20 us each a step to settle)."""
import itertools
import math
from collections import deque

from engine.api.request import EngineInputError

PACE_S = 1.0      # a queue that has held contexts this long, one waiting out its bound, waits at least its pace


class AdmissionQueue:
    def __init__(self, max_wait_s: float):
        self.max_wait_s = max_wait_s
        self.entries: dict = {}          # seq -> (arrived at, its KV tokens); insertion order is the FIFO
        self.tokens = 0
        self.queued = self.expired = 0
        self.waited_s = self.max_waited_s = 0.0       # of the contexts admitted from the queue
        self.frames_per_id: float | None = None       # of the streams the model ended (eos), moving average
        self._ends: tuple[int, list] = (-1, [])
        self.held_since: float | None = None          # the queue has held contexts from then on
        self.joined: deque = deque()                  # when contexts joined from the queue, the last PACE_S
        self.expired_at = -math.inf                   # when one last waited out the bound, or the pace refused one

    def __len__(self) -> int:
        return len(self.entries)

    def seqs(self) -> list:
        return list(self.entries)

    def holds(self, seq) -> bool:
        return seq in self.entries

    def oldest_wait_s(self, now: float) -> float:
        try:                                      # read beside the engine thread (stats)
            return now - next(iter(self.entries.values()))[0]
        except (StopIteration, RuntimeError):
            return 0.0

    def enter(self, sched, seq, why: str | None, step_ms: float, now: float) -> None:
        """Queues `seq` (refused with `why`: a reason it cannot join now, or None: others wait ahead)."""
        admission = sched.admission
        if not self.max_wait_s:
            raise admission.busy(why)
        tokens = sum(admission.reserve_tokens(seq))
        wait = max(self._room_s(sched, tokens, step_ms), self._step_wait_s(sched, seq, step_ms))
        pace = self._pace_s(now)
        wait = max(wait, pace) if wait else 0.0                  # room now is room, however slow the queue was
        if wait > self.max_wait_s:
            if pace > self.max_wait_s:
                self.expired_at = now          # the pace holds while it refuses: lapsed, the next wave would expire
            raise admission.busy(f"{why or f'{len(self)} requests wait ahead'}, room expected in {_ms(wait)} (the "
                                 f"queue waits {_ms(self.max_wait_s)} at most)")
        if not self.entries:             # a queue refilled under overload goes on at its pace
            self.held_since = now - PACE_S if now - self.expired_at <= PACE_S else now
        self.entries[seq] = (now, tokens)
        self.tokens += tokens
        self.queued += 1

    def ended(self, seq, reason: str) -> None:
        if reason == "eos" and seq.text.num_text_ids:
            rate = seq.frames / seq.text.num_text_ids
            self.frames_per_id = rate if self.frames_per_id is None else 0.9 * self.frames_per_id + 0.1 * rate

    def discard(self, seq) -> bool:
        entry = self.entries.pop(seq, None)
        if entry is not None:
            self.tokens -= entry[1]
        if not self.entries:
            self.held_since = None
        return entry is not None

    def admit(self, sched, step_ms: float, now: float) -> list:
        """Moves the head into `sched.waiting` while it may join; returns (seq, error) for those to fail: waited past
        the bound (the oldest first: the FIFO's arrivals are its deadlines' order) or grown past any cache."""
        admission, failed = sched.admission, []
        for seq, (since, _) in list(self.entries.items()):
            if now - since > self.max_wait_s:
                self.expired, self.expired_at = self.expired + 1, now
                failed.append((seq, admission.busy(f"no room within {_ms(self.max_wait_s)} in the queue")))
                continue
            try:
                if admission.blocker(seq, sched.num_active, step_ms) is not None:
                    break
            except EngineInputError as exc:      # its text grew past the whole KV cache while it waited
                failed.append((seq, exc))
                continue
            self.discard(seq)
            admission.take(seq)
            sched.waiting.append(seq)
            self.joined.append(now)
            self.waited_s += now - since
            self.max_waited_s = max(self.max_waited_s, now - since)
        return failed

    def _pace_s(self, now: float) -> float:
        """Where the queue has held contexts for PACE_S and one of them waited out the bound meanwhile (or the pace
        refused one), those ahead and this one take as long as the last PACE_S took to admit as many: the projections
        below miss what the engine cannot foresee (streams ending late, the moving average's swings), and under
        overload every context they queue would wait its bound and then fail. A burst that drains in time keeps the
        projections alone."""
        while self.joined and self.joined[0] < now - PACE_S:
            self.joined.popleft()
        if self.held_since is None or now - self.held_since < PACE_S or now - self.expired_at > PACE_S:
            return 0.0
        return (len(self) + 1) * PACE_S / len(self.joined) if self.joined else math.inf

    def _room_s(self, sched, tokens: int, step_ms: float) -> float:
        """When the streams that end first leave a slot and KV for those queued ahead and this one."""
        admission = sched.admission
        slots = admission.max_active - sched.num_active - len(self) - 1
        kv = admission.kv_tokens - admission.reserved - self.tokens - tokens
        if slots >= 0 and kv >= 0:
            return 0.0
        for frames, freed in self._ending(sched):
            slots, kv = slots + 1, kv + freed
            if slots >= 0 and kv >= 0:
                return max(frames, 1) * step_ms / 1000       # one overdue ends a step away at the soonest
        return math.inf

    def _step_wait_s(self, sched, seq, step_ms: float) -> float:
        """Where the measured line says the streams admitted, those queued ahead and this one make a step past
        --max-step-ms, enough must end first. Past it otherwise while streams start, the step carries their
        prefills, done once those ahead have started (a prefill budget a step); where the last step that started
        none was past it too, or none start, enough running streams must end to bring it under."""
        admission = sched.admission
        bound = admission.max_step_ms
        if bound is None or not sched.num_active:
            return 0.0
        k = sched.num_active + len(self) + 1 - admission.streams_within_bound()
        if k <= 0 and step_ms <= bound:
            return 0.0
        if k <= 0 and (sched.started or sched.waiting or self.entries) and not (sched.calm_step_ms or 0) > bound:
            per_step = max(1, sched.max_prefill_tokens // max(1, admission.prompt_estimate(seq)))
            return math.ceil((len(sched.waiting) + len(self) + 1) / per_step) * step_ms / 1000
        if step_ms > bound:
            k = max(k, len(sched.running) - math.floor(len(sched.running) * bound / step_ms))   # ~ proportional
        ends = self._ending(sched)      # overdue (0 frames left as projected) is no room now: the pace then holds
        return max(ends[k - 1][0], 1) * step_ms / 1000 if 0 < k <= len(ends) else math.inf

    def _ending(self, sched) -> list[tuple[int, int]]:
        """(frames left, KV tokens freed) of the admitted streams whose end is known, soonest first; once a step."""
        if self._ends[0] != sched.steps:
            ends = [(self._frames_left(s), s.reserved) for s in itertools.chain(sched.running, sched.waiting)]
            self._ends = (sched.steps, sorted(e for e in ends if e[0] is not None))
        return self._ends[1]

    def _frames_left(self, seq) -> float | None:
        """Frames to go: a closed text's as the model has ended them (frames a text id), within its cap or runaway
        guard; None while its length is open and uncapped."""
        if seq.finish_reason:
            return 0
        if not seq.text.closed and seq.request.max_frames is None:
            return None
        expected = self.frames_per_id * seq.text.num_text_ids if seq.text.closed and self.frames_per_id else math.inf
        return max(0, min(seq.max_frames, expected) - seq.frames)


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:.0f} ms"
