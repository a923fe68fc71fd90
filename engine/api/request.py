"""What callers hand the engine and what it hands back: plain dataclasses, no tensors."""
from dataclasses import dataclass, field

import numpy as np


class EngineInputError(ValueError):
    """Bad request input; `code` is a stable machine-readable reason."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code

    def __reduce__(self):      # crosses a process pool whole
        return type(self), (self.code, str(self))


# the official wrapper's fallbacks when a checkpoint has no generation_config.json
_FALLBACK = dict(do_sample=True, temperature=0.9, top_k=50, top_p=1.0, repetition_penalty=1.05,
                 subtalker_dosample=True, subtalker_temperature=0.9, subtalker_top_k=50, subtalker_top_p=1.0)


@dataclass
class SamplingParams:
    """Unset (None) fields take the checkpoint's generation_config.json value."""
    do_sample: bool | None = None
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    repetition_penalty: float | None = None
    subtalker_do_sample: bool | None = None
    subtalker_temperature: float | None = None
    subtalker_top_k: int | None = None
    subtalker_top_p: float | None = None
    seed: int | None = None

    @classmethod
    def greedy(cls, **kw) -> "SamplingParams":
        return cls(do_sample=False, subtalker_do_sample=False, **kw)

    def with_defaults(self, generation: dict) -> "SamplingParams":
        def pick(field: str):
            key = "subtalker_dosample" if field == "subtalker_do_sample" else field
            value = getattr(self, field)
            return value if value is not None else generation.get(key, _FALLBACK[key])
        fields = [f for f in self.__dataclass_fields__ if f != "seed"]
        return SamplingParams(**{f: pick(f) for f in fields}, seed=self.seed)


@dataclass
class VoiceRef:
    """A voice-clone reference (Base models)."""
    audio: np.ndarray
    sample_rate: int
    text: str | None = None          # None: x_vector_only
    x_vector_only: bool = False


@dataclass
class SynthesisRequest:
    text: str = ""
    voice: str | None = None          # CustomVoice speaker, or a registered clone voice
    language: str = "auto"
    instruct: str | None = None
    ref: VoiceRef | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_frames: int | None = None     # None: scaled to the text length
    ignore_eos: bool = False
    text_complete: bool = True        # False: more text follows through append_text()
    non_streaming_text: bool | None = False   # None: the layout the official code defaults to for the variant
    chunk_frames: tuple[int, ...] = (1, 2, 4, 8, 16)   # the last one repeats
    adaptive_chunks: bool = True


@dataclass
class AudioChunk:
    pcm: np.ndarray
    codes: np.ndarray
    frame_offset: int
    sample_offset: int
    final: bool = False
    finish_reason: str | None = None  # eos | max_frames | length | cancelled
    sent_at: float = 0.0


@dataclass(slots=True)
class UnjoinedChunk:
    """An AudioChunk whose frames are joined by whoever takes it (the caller's thread, or the engine core's I/O thread
    with the rest of its batch), never by the engine thread."""
    frames: list                      # (codes [K], PCM) a frame, as read back: never written again
    frame_offset: int
    sample_offset: int
    final: bool = False
    finish_reason: str | None = None
    sent_at: float = 0.0

    def joined(self) -> AudioChunk:
        codes, pcm = zip(*self.frames)
        return AudioChunk(np.concatenate(pcm), np.stack(codes), self.frame_offset, self.sample_offset, self.final,
                          self.finish_reason, self.sent_at)           # copies, even of one frame
