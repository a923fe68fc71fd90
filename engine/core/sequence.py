"""Per-request state on the host."""
from enum import Enum, auto

from engine.api.request import SynthesisRequest
from engine.models.base import AudioFormat


class Status(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


class Sequence:
    def __init__(self, seq_id: int, request: SynthesisRequest, handle, seed: int, text_prefix: str,
                 audio: AudioFormat | None):
        self.id, self.request, self.handle, self.seed, self.audio = seq_id, request, handle, seed, audio
        self.status = Status.WAITING
        self.conditioning = None              # the model's own per-stream state, set by its prepare()
        self.closed = request.text_complete
        self.unsettled = [text_prefix, request.text]    # text whose ids may still change
        self.settled = 0
        self.role_ids: list[int] = []
        self.feed: list[int] = []             # the model's ids before the text (from text_start on: the text's)
        self.text_start = 0
        self.fed = 0
        self.eos_fed = False
        self.slot = -1
        self.reserved = 0
        self.prefix = None
        self.cached_prefix = None
        self.block_table: list[int] = []
        self.synced_blocks = 0
        self.num_tokens = 0
        self.frames_started = 0               # frames whose first code is drawn
        self.frame_started = False            # the next frame's first code is drawn: it can be predicted
        self.frames = 0
        self.unread = 0
        self.pending: list = []               # (codes [K], PCM [samples])
        self.chunks = 0
        self.first_sent_at: float | None = None
        self.sent_samples = 0
        self.finish_reason: str | None = None

    @property
    def num_text_ids(self) -> int:
        return len(self.feed) - self.text_start

    @property
    def max_frames(self) -> int:
        if self.request.max_frames is not None:
            return self.request.max_frames
        # runaway guard
        return 40 + 8 * self.num_text_ids if self.closed else 1 << 30

    def next_text_id(self, pad: int, eos: int) -> int | None:
        if self.fed < len(self.feed):
            self.fed += 1
            return self.feed[self.fed - 1]
        if not self.closed:
            return None
        if not self.eos_fed:
            self.eos_fed = True
            return eos
        return pad

    def text_ready(self) -> bool:
        return self.fed < len(self.feed) or self.closed

    def chunk_size(self, first: int = 1) -> int:
        sizes = self.request.chunk_frames
        return sizes[min(self.chunks, len(sizes) - 1)] if self.chunks else max(sizes[0], first)

    def buffered_s(self, now: float) -> float:
        if self.first_sent_at is None:
            return 0.0
        return self.sent_samples / self.audio.sample_rate - (now - self.first_sent_at)

    def ahead_s(self, now: float) -> float:
        return self.buffered_s(now) + len(self.pending) * self.audio.frame_s

    def should_send(self, now: float, margin_s: float, first: int = 1) -> bool:
        if self.finish_reason and not self.unread or len(self.pending) >= self.chunk_size(first):
            return True
        return bool(self.pending) and self.request.adaptive_chunks and self.first_sent_at is not None \
            and self.buffered_s(now) < margin_s

    @property
    def eos_allowed(self) -> bool:
        # reference min_new_tokens = 2
        return self.frames_started >= 2 and self.closed and not self.request.ignore_eos
