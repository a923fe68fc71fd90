"""A context's text up to a flush or end, spoken by one engine request; idle past --idle-release, it frees its slot."""
import time
from dataclasses import dataclass, field

from engine import SamplingParams, SynthesisRequest
from qwen_tts_client import protocol as p

from .engine_stream import EngineStream

SAMPLING_FIELDS = ("temperature", "top_k", "top_p", "repetition_penalty", "seed")
NON_STREAMING_TEXT = {"streaming": False, "whole": True}     # text_layout -> the engine's non_streaming_text


@dataclass
class Utterance:
    first_text_at: float = field(default_factory=time.monotonic)    # wall clock: time to first audio starts
    parts: list[str] = field(default_factory=list)
    chars: int = 0
    closer: p.Flush | p.End | None = None
    flush_id: int = 0
    released: bool = False           # closed by --idle-release, not by the client: no `flushed`
    stream: EngineStream | None = None
    truncated: bool = False          # the engine stopped it (frame cap) before it was closed: later text is dropped
    last_activity: float = 0.0        # its last text or audio (the gateway's clock)

    @property
    def blank(self) -> bool:
        return not "".join(self.parts).strip()

    @property
    def pending_chars(self) -> int:
        return self.chars + 1

    def start(self, s: p.Text, gateway) -> None:
        sampling = SamplingParams(**{k: getattr(s, k) for k in SAMPLING_FIELDS if getattr(s, k) is not None})
        request = SynthesisRequest(text="".join(self.parts), voice=s.voice, language=s.language or "auto",
                                   instruct=s.instruct, sampling=sampling, max_frames=gateway.config.max_frames,
                                   text_complete=self.closer is not None,
                                   non_streaming_text=NON_STREAMING_TEXT.get(s.text_layout, None if s.end else False))
        self.stream = EngineStream(gateway.engine, gateway.metrics, request, "websocket", self.first_text_at)

    def add(self, text: str) -> None:
        self.parts.append(text)
        if self.stream and not self.truncated:
            self.stream.append(text)

    def close(self, closer: p.Flush | p.End) -> None:
        self.closer = closer
        if self.stream and not self.truncated:
            self.stream.cancel() if self.blank else self.stream.close()

    def release_if_idle(self, now: float, after: float) -> bool:
        if self.closer or not self.stream or self.stream.handle.done or now - self.last_activity < after:
            return False
        self.released = True
        self.close(p.Flush(""))
        return True
