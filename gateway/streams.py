"""One engine request as the gateway sees it: an admission slot, the engine's handle, and its latency metrics."""
import time
from typing import AsyncIterator

from engine import AudioChunk, SynthesisRequest

from .audio import SOURCE_RATE
from .metrics import Metrics
from .protocol import BUSY, ProtocolError


class Admission:
    """At most `limit` requests generate at once (--max-active), and none joins while the engine's measured step
    time is over `max_step_ms` (--max-step-ms: the streams already running would fall behind real time). A request
    beyond either is refused, never queued."""

    def __init__(self, limit: int, max_step_ms: float | None = None, step_ms=lambda: 0.0):
        self.limit, self.active = limit, 0
        self.max_step_ms, self.step_ms = max_step_ms, step_ms

    def acquire(self) -> None:
        if self.active >= self.limit:
            raise ProtocolError(BUSY, f"server busy: {self.limit} streams are generating; retry shortly")
        if self.max_step_ms is not None and self.active and self.step_ms() > self.max_step_ms:
            raise ProtocolError(BUSY, f"server busy: at capacity ({self.step_ms():.0f} ms per 80 ms frame step); "
                                      f"retry shortly")
        self.active += 1

    def release(self) -> None:
        self.active -= 1


class EngineStream:
    def __init__(self, engine, admission: Admission, metrics: Metrics, request: SynthesisRequest, api: str,
                 started_at: float | None = None):
        admission.acquire()
        try:
            self.handle = engine.submit(request)
        except BaseException:
            admission.release()
            raise
        self.admission, self.metrics, self.api = admission, metrics, api
        self.started_at = started_at or time.monotonic()
        self.first_audio: tuple[float, int] | None = None      # (time, samples of the first chunk)
        self.samples = 0
        self.finish_reason: str | None = None
        self.holds_slot = True
        metrics.requests[api] += 1

    def append(self, text: str) -> None:
        self.handle.append_text(text)

    def close(self) -> None:
        self.handle.close_text()

    def cancel(self) -> None:
        """The engine frees the request before its next step; no chunk of it is wanted any more."""
        self.handle.cancel()
        self._release()

    def _release(self) -> None:
        if self.holds_slot:
            self.holds_slot = False
            self.admission.release()

    async def chunks(self) -> AsyncIterator[AudioChunk]:
        """The request's chunks to the final one; an engine failure raises (EngineInputError or another error)."""
        try:
            async for chunk in self.handle:
                self._observe(chunk)
                yield chunk
        finally:
            self._release()

    def _observe(self, chunk: AudioChunk) -> None:
        now, n = time.monotonic(), len(chunk.pcm)
        if n and self.first_audio is None:
            self.first_audio = (now, n)
            self.metrics.ttfa.observe(now - self.started_at, self.api)
        self.samples += n
        self.metrics.audio_samples += n
        if chunk.final:
            self.finish_reason = chunk.finish_reason
            if self.first_audio and self.samples > self.first_audio[1] and chunk.finish_reason != "cancelled":
                after_first = (self.samples - self.first_audio[1]) / SOURCE_RATE
                self.metrics.rtf.observe((now - self.first_audio[0]) / after_first, self.api)
