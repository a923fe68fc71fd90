"""One stream on the host: its request, its text feed, its KV state, its playout, and where its frames stand."""
from dataclasses import dataclass, field
from enum import Enum, auto

from engine.api.request import SynthesisRequest
from engine.core.playout import Playout
from engine.core.text_feed import TextFeed
from engine.models.base import AudioFormat


class Status(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


@dataclass
class KVState:
    """Written by the KV cache alone."""
    num_tokens: int = 0
    block_table: list[int] = field(default_factory=list)
    cached_prefix: object = None          # the prefix cache's entry this stream shares


class Sequence:
    def __init__(self, seq_id: int, request: SynthesisRequest, handle, seed: int, text_prefix: str,
                 audio: AudioFormat):
        self.id, self.request, self.handle, self.seed = seq_id, request, handle, seed
        self.status = Status.WAITING
        self.conditioning = None              # the model's own per-stream state, set by its prepare()
        self.prefix = None                    # the prompt's shared rows, set by the model's prepare()
        self.text = TextFeed(text_prefix, request.text, request.text_complete)
        self.kv = KVState()
        self.playout = Playout(request.chunk_frames, request.adaptive_chunks, audio)
        self.slot = -1
        self.reserved = 0
        self.frames_started = 0               # frames whose first code is drawn
        self.frame_started = False            # the next frame's first code is drawn: it can be predicted
        self.frames = 0
        self.finish_reason: str | None = None
        self.arrived_at = self.started_at = 0.0   # monotonic: the engine took it; it took its slot

    @property
    def max_frames(self) -> int:
        if self.request.max_frames is not None:
            return self.request.max_frames
        # runaway guard
        return 40 + 8 * self.text.num_text_ids if self.text.closed else 1 << 30

    @property
    def eos_allowed(self) -> bool:
        # reference min_new_tokens = 2
        return self.frames_started >= 2 and self.text.closed and not self.request.ignore_eos
