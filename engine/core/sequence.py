"""Per-request state on the host: text feed, frame progress, chunking, KV blocks and the state slot."""
from enum import Enum, auto

from engine.api.request import SynthesisRequest
from engine.models.base import AudioFormat


class Status(Enum):
    WAITING = auto()    # not prefilled yet (maybe waiting for text)
    RUNNING = auto()
    FINISHED = auto()


class Sequence:
    def __init__(self, seq_id: int, request: SynthesisRequest, handle, seed: int, text_prefix: str,
                 audio: AudioFormat | None):
        self.id, self.request, self.handle, self.seed, self.audio = seq_id, request, handle, seed, audio
        self.status = Status.WAITING
        self.voice = None                     # the model's conditioning (model.prepare)
        self.language_id: int | None = None
        self.instruct_ids: list[int] | None = None
        self.closed = request.text_complete
        self.unsettled = [text_prefix, request.text]    # text whose ids may still change, in the pieces it came in
        self.settled = 0                      # ids of text_prefix + text that no later text can change
        self.role_ids: list[int] = []
        self.feed: list[int] = []             # ids fed one per frame: an ICL reference transcript's, then the text's
        self.text_start = 0                   # where the text's settled ids begin in feed
        self.fed = 0                          # next index into feed
        self.eos_fed = False
        self.slot = -1
        self.reserved = 0                     # KV tokens admission holds back for it
        self.prefix = None                    # models.base.Prefix its prompt starts with (admission counts it once)
        self.cached_prefix = None             # prefix_cache.CachedPrefix whose full blocks lead block_table
        self.block_table: list[int] = []
        self.synced_blocks = 0                # block_table entries the device's tables hold
        self.num_tokens = 0                   # tokens in the talker KV cache
        self.num_c0 = 0                       # codebook-0 ids sampled so far
        self.has_c0 = False                   # a sampled c0 waits for the code predictor
        self.frames = 0                       # completed frames
        self.unread = 0                       # frames whose audio is still being copied to the host
        self.pending: list = []               # frames on the host not sent yet: (codes [K], PCM [samples])
        self.chunks = 0
        self.first_sent_at: float | None = None   # the listeners' clock at the first chunk
        self.sent_samples = 0
        self.finish_reason: str | None = None

    @property
    def num_text_ids(self) -> int:
        return len(self.feed) - self.text_start

    @property
    def max_frames(self) -> int:
        if self.request.max_frames is not None:
            return self.request.max_frames
        # runaway guard: about twice a slow speaking rate per text token, plus slack
        return 40 + 8 * self.num_text_ids if self.closed else 1 << 30

    def next_text_id(self, pad: int, eos: int) -> int | None:
        """The text id for the next talker step, or None while it has not arrived. Advances the feed."""
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
        """Frames in the next chunk: the request's schedule; at least `first` in the first one."""
        sizes = self.request.chunk_frames
        return sizes[min(self.chunks, len(sizes) - 1)] if self.chunks else max(sizes[0], first)

    def buffered_s(self, now: float) -> float:
        """Audio a real-time player started at the first chunk still has queued."""
        if self.first_sent_at is None:
            return 0.0
        return self.sent_samples / self.audio.sample_rate - (now - self.first_sent_at)

    def ahead_s(self, now: float) -> float:
        """buffered_s, with the frames on the host not sent yet (0 before the first chunk)."""
        return 0.0 if self.first_sent_at is None else self.buffered_s(now) + len(self.pending) * self.audio.frame_s

    def should_send(self, now: float, margin_s: float, first: int = 1) -> bool:
        if self.finish_reason and not self.unread or len(self.pending) >= self.chunk_size(first):
            return True
        return bool(self.pending) and self.request.adaptive_chunks and self.first_sent_at is not None \
            and self.buffered_s(now) < margin_s

    @property
    def eos_allowed(self) -> bool:
        # EOS stays masked for the first 2 ids (reference min_new_tokens) and while text may still come
        return self.num_c0 >= 2 and self.closed and not self.request.ignore_eos
