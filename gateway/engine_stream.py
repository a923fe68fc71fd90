"""One engine request as the gateway sees it: the engine's handle and its latency metrics."""
import time
from typing import AsyncIterator

from engine import AudioChunk, SynthesisRequest

from .metrics import Metrics


class EngineStream:
    def __init__(self, engine, metrics: Metrics, request: SynthesisRequest, api: str, started_at: float | None = None):
        self.engine, self.handle = engine, engine.submit(request)
        self.rate, self.samples_per_frame = engine.info["sample_rate"], engine.info["samples_per_frame"]
        self.metrics, self.api = metrics, api
        self.started_at = started_at or time.monotonic()
        self.first_audio: tuple[float, int] | None = None      # (time, samples of the first chunk)
        self.samples = 0
        self.finish_reason: str | None = None
        metrics.requests[api] += 1

    @property
    def frames(self) -> int:
        return self.samples // self.samples_per_frame

    def append(self, text: str) -> None:
        self.engine.append_text(self.handle.id, text)

    def close(self) -> None:
        self.engine.close_text(self.handle.id)

    def cancel(self) -> None:
        """The engine frees the request before its next step; no chunk of it is wanted any more."""
        self.engine.cancel(self.handle.id)

    async def chunks(self) -> AsyncIterator[AudioChunk]:
        async for chunk in self.handle:
            self._observe(chunk)
            yield chunk

    def _observe(self, chunk: AudioChunk) -> None:
        now, n = time.monotonic(), len(chunk.pcm)
        if n and self.first_audio is None:
            self.first_audio = (now, n)
            self.metrics.ttfa.observe(now - self.started_at, self.api)
        if n and chunk.sent_at:                      # the engine's clock: time.monotonic, one for the whole host
            self.metrics.relay.observe(now - chunk.sent_at, self.api)
        self.samples += n
        self.metrics.audio_samples += n
        if chunk.final:
            self.finish_reason = chunk.finish_reason
            if self.first_audio and self.samples > self.first_audio[1] and chunk.finish_reason != "cancelled":
                after_first = (self.samples - self.first_audio[1]) / self.rate
                self.metrics.rtf.observe((now - self.first_audio[0]) / after_first, self.api)
