"""Admission as a request arrives: a slot, a step time that keeps real time, KV memory; else it queues
(engine/core/admission_queue.py) or gets `busy`."""
import math

from engine.api.request import EngineInputError
from engine.core.step_cost import StepCost

HORIZON_TOKENS = 512           # KV held per open-length stream


class Admission:
    def __init__(self, max_active: int, kv_tokens: int, block_size: int, prompt_tokens,
                 max_step_ms: float | None = None, cost: StepCost | None = None):
        self.max_active, self.kv_tokens, self.block_size = max_active, kv_tokens, block_size
        self.max_step_ms, self.cost = max_step_ms, cost
        self.prompt_tokens = prompt_tokens
        self.reserved = 0
        self.prefixes: dict = {}       # prefix key -> (admitted users, tokens)
        self.refused = 0

    def _round(self, tokens: int) -> int:
        return -(-tokens // self.block_size) * self.block_size

    @staticmethod
    def _text_ids(seq) -> int:
        return max(seq.text.num_text_ids, len(seq.request.text) // 3)        # ~4 characters an id before tokenization

    def prompt_estimate(self, seq) -> int:
        return self.prompt_tokens(seq, self._text_ids(seq))

    def reserve_tokens(self, seq) -> tuple[int, int]:
        """Expected KV as (own, prefix's); a prefix's full blocks are shared."""
        r = seq.request
        text_ids = self._text_ids(seq)
        frames = r.max_frames if r.max_frames is not None else 40 + 8 * text_ids if seq.text.closed else HORIZON_TOKENS
        shared = seq.prefix.length // self.block_size * self.block_size
        return self._round(self.prompt_estimate(seq) + min(frames, HORIZON_TOKENS) + 2) - shared, \
            self._round(seq.prefix.length)

    def blocker(self, seq, active: int, step_ms: float) -> str | None:
        """Why `seq` cannot join now (None: it can); a request no empty cache could hold fails here."""
        own, prefix = self.reserve_tokens(seq)
        if own + prefix > self.kv_tokens:
            raise EngineInputError("text_too_long", f"the request needs about {own + prefix} KV tokens; the whole "
                                                    f"cache holds {self.kv_tokens}")
        if active >= self.max_active:
            return f"{self.max_active} streams are generating"
        if self.max_step_ms is not None and active:
            if step_ms > self.max_step_ms:
                return f"at capacity ({step_ms:.0f} ms per 80 ms frame step)"
            fits = self.streams_within_bound()
            if active + 1 > fits:                             # a wave joining at once would pass it
                return f"at capacity ({active} streams: the measured step keeps {self.max_step_ms:.0f} ms for {fits})"
        if self.reserved + self._need(seq, own, prefix) > self.kv_tokens:
            return f"the KV cache is committed ({self.reserved} of {self.kv_tokens} tokens)"
        return None

    def streams_within_bound(self) -> float:
        return self.cost.streams_within(self.max_step_ms) if self.cost and self.max_step_ms is not None else math.inf

    def _need(self, seq, own: int, prefix: int) -> int:
        return own + (0 if seq.prefix.key in self.prefixes else prefix)

    def admit(self, seq, active: int, step_ms: float) -> None:
        why = self.blocker(seq, active, step_ms)
        if why is not None:
            raise self.busy(why)
        self.take(seq)

    def take(self, seq) -> None:
        """Reserves what `blocker` found free."""
        own, prefix = self.reserve_tokens(seq)
        users, prefix = self.prefixes.get(seq.prefix.key, (0, prefix))
        self.reserved += self._need(seq, own, prefix)
        self.prefixes[seq.prefix.key] = (users + 1, prefix)
        seq.reserved = own

    def release(self, seq) -> None:
        users, prefix = self.prefixes.pop(seq.prefix.key)
        if users > 1:
            self.prefixes[seq.prefix.key] = (users - 1, prefix)
        else:
            self.reserved -= prefix
        self.reserved -= seq.reserved
        seq.reserved = 0

    def busy(self, why: str) -> EngineInputError:
        self.refused += 1
        return EngineInputError("busy", f"server busy: {why}; retry shortly")
