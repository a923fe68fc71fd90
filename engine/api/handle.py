"""A caller's view of one request: push text, cancel, iterate its AudioChunks."""
import asyncio
import queue

from engine.api.request import AudioChunk


class RequestHandle:
    def __init__(self, engine, seq_id: int, check_append, sink=None):
        self.engine, self.id, self.check_append, self.sink = engine, seq_id, check_append, sink
        try:
            self._loop = asyncio.get_running_loop()
            self._queue = asyncio.Queue()
        except RuntimeError:
            self._loop, self._queue = None, queue.SimpleQueue()
        self.done = False

    def append_text(self, text: str) -> None:
        self.check_append(text)
        self.engine.append_text(self.id, text)

    def close_text(self) -> None:
        self.engine.close_text(self.id)

    def cancel(self) -> None:
        self.engine.cancel(self.id)

    def deliver(self, item: AudioChunk | Exception) -> None:
        if self.sink is not None or self._loop is None:
            return self.sink(self, item) if self.sink is not None else self._queue.put(item)
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:                    # the caller's loop is gone
            self.engine.cancel(self.id)

    def put(self, item: AudioChunk | Exception) -> None:
        """From the thread or event loop that owns the handle."""
        self._queue.put_nowait(item)

    def _take(self, item):
        if isinstance(item, Exception):
            self.done = True
            raise item
        self.done = item.final
        return item

    def __aiter__(self):
        return self

    async def __anext__(self) -> AudioChunk:
        if self.done:
            raise StopAsyncIteration
        return self._take(await self._queue.get())

    def iter_blocking(self):
        while not self.done:
            yield self._take(self._queue.get())
