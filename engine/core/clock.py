"""The time that logic reads: timeouts, idle release, a slow consumer's lag, the aligner's playback pacing, a
listener's playback. Passed where the time is read: the real clock here, one a test advances in the tests
(tests/fake_clock.py). Measurements (step times, latency metrics) keep reading the wall clock."""
import asyncio
import time


class Clock:
    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def wait_for(self, awaitable, seconds: float | None):
        """asyncio.wait_for on this clock: the awaitable's result, or TimeoutError after `seconds` (None: no bound)."""
        if seconds is None:
            return await awaitable
        task, timer = asyncio.ensure_future(awaitable), asyncio.ensure_future(self.sleep(seconds))
        try:
            done, _ = await asyncio.wait((task, timer), return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            task.cancel()                   # (a no-op once it is done)
        if task not in done:
            raise TimeoutError
        return task.result()

REAL_CLOCK = Clock()
