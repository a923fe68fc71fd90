"""The clock logic reads (timeouts, pacing, playback); tests pass a fake one."""
import asyncio
import time


class Clock:
    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def wait_for(self, awaitable, seconds: float | None):
        if seconds is None:
            return await awaitable
        task, timer = asyncio.ensure_future(awaitable), asyncio.ensure_future(self.sleep(seconds))
        try:
            done, _ = await asyncio.wait((task, timer), return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            task.cancel()
        if task not in done:
            raise TimeoutError
        return task.result()

REAL_CLOCK = Clock()
