"""A caller's view of one request: its id and its queue of AudioChunks (and its error), iterated async or blocking."""
import asyncio
import queue

from engine.api.request import AudioChunk, UnjoinedChunk


class RequestHandle:
    def __init__(self, request_id: int, abandon=None):
        """`abandon()`: what `deliver` calls once the caller's event loop is gone."""
        self.id, self.abandon = request_id, abandon
        try:
            self._loop = asyncio.get_running_loop()
            self._queue = asyncio.Queue()
        except RuntimeError:
            self._loop, self._queue = None, queue.SimpleQueue()
        self.done = False

    def deliver(self, item: AudioChunk | UnjoinedChunk | Exception) -> None:
        """From any thread (the engine's). An UnjoinedChunk is joined here: its frames are views of a whole step's
        read-back, which a caller slow to take them would otherwise hold."""
        if isinstance(item, UnjoinedChunk):
            item = item.joined()
        if self._loop is None:
            return self._queue.put(item)
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:                    # the caller's loop is gone
            if self.abandon is not None:
                self.abandon()

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
