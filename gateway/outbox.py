"""A socket's outbound frames, written in order by one task; a client too far behind is dropped as too slow."""
import asyncio
import logging
from collections import deque
from contextlib import suppress

from qwen_tts_client import protocol as p

log = logging.getLogger("qwen_tts_gateway")
CLOSE_TIMEOUT = 5.0                 # seconds a close may wait for a client that does not read


class Outbox:
    def __init__(self, ws, max_seconds: float, max_bytes: int, clock):
        self.ws, self.max_seconds, self.max_bytes, self.clock = ws, max_seconds, max_bytes, clock
        self.frames: deque[tuple[str | bytes, float]] = deque()     # (frame, when the client needs it)
        self.bytes = 0
        self.last_due = 0.0                 # frames go out in order: none is needed before the one ahead of it
        self.closing: tuple[int, str] | None = None
        self.wake = asyncio.Event()
        self.finished = asyncio.Event()     # the writer is done: the socket is closed, or a write failed
        self.task = asyncio.create_task(self._write_all())

    def put(self, frame: str | bytes, due: float | None = None) -> bool:
        if self.closing is None:
            now = self.clock.monotonic()
            self.last_due = max(self.last_due, now if due is None else due)
            self.frames.append((frame, self.last_due))
            self.bytes += len(frame)
            self.wake.set()
        return not self.too_slow(self.clock.monotonic())

    def too_slow(self, now: float) -> bool:
        behind = now - self.frames[0][1] if self.frames else 0.0
        return self.closing is None and (behind > self.max_seconds or self.bytes > self.max_bytes)

    def drop(self) -> None:
        """Forgets every queued frame, the one being written included."""
        self.task.cancel()
        self.frames.clear()
        self.bytes = 0
        self.task = asyncio.create_task(self._write_all())

    async def close(self, code: int, reason: str) -> None:
        if self.closing is None:
            self.closing = (code, reason)
            self.wake.set()
        try:
            await self.clock.wait_for(self.finished.wait(), CLOSE_TIMEOUT)
        except TimeoutError:
            self.stop()

    def stop(self) -> None:
        self.task.cancel()
        self.finished.set()

    async def _write_all(self) -> None:
        try:
            while self.frames or self.closing is None:
                if not self.frames:
                    self.wake.clear()
                    await self.wake.wait()
                    continue
                frame = self.frames[0][0]
                await (self.ws.send_text(frame) if isinstance(frame, str) else self.ws.send_bytes(frame))
                self.frames.popleft()
                self.bytes -= len(frame)
            await self.ws.close(*self.closing)
        except Exception as exc:            # the client left, or the frame could not be sent: close, never go silent
            log.info("socket write failed (%s); closing", type(exc).__name__)
            with suppress(Exception):
                await self.clock.wait_for(self.ws.close(p.CLOSE_INTERNAL, "write failed"), CLOSE_TIMEOUT)
        self.finished.set()
