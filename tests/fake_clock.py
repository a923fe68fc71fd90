"""A clock that moves only when the test advances it (engine/core/clock.py): the timeouts, idle release, slow
consumers and playback pacing of the engine, the gateway and the aligner then follow the test, not the machine's load."""
import asyncio
import time

from engine.core.clock import Clock


class FakeClock(Clock):
    def __init__(self):
        self.now = 0.0
        self.slept_at: list[float] = []     # the time at the start of each sleep: its sleeper is done with that time

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        end = self.now + seconds
        self.slept_at.append(self.now)
        while self.now < end:
            await asyncio.sleep(0.001)

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def checked(self, seconds: float, sleepers: int = 1) -> None:
        """Advances, then waits until `sleepers` sleep again (each watchdog has checked the new time)."""
        self.advance(seconds)
        deadline = time.monotonic() + 30
        while self.slept_at.count(self.now) < sleepers:
            assert time.monotonic() < deadline, "no sleeper woke"
            await asyncio.sleep(0.001)
