"""The time that logic reads: timeouts, idle release, a slow consumer's lag, the aligner's gathering, a listener's
playback. One object passed where the time is read: the real clock here, a clock a test advances in the tests
(tests/fake_clock.py). Measurements (step times, latency metrics) keep reading the wall clock."""
import asyncio
import time


class Clock:
    @staticmethod
    def monotonic() -> float:
        return time.monotonic()

    @staticmethod
    async def sleep(seconds: float) -> None:
        await asyncio.sleep(seconds)


REAL_CLOCK = Clock()
