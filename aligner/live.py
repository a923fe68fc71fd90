"""One context's word timestamps on an asyncio loop; a slow or failing aligner stops its words, never its audio; a
full one refuses them before the first."""
import asyncio
from contextlib import suppress
from typing import Awaitable, Callable

import numpy as np

from engine.core.clock import REAL_CLOCK, Clock
from engine.core.listener_clock import ListenerClock

from .text import Word
from .bargein import spoken_until
from .stream import RATE, WordStream

BARGE_IN_WAIT_S = 1.0      # a barge-in's answer waits at most this long for the words of the audio played


class LiveWords:
    def __init__(self, service, language: str = "auto", timeout: float = 5.0, clock: Clock = REAL_CLOCK,
                 on_words: Callable[[list[Word]], Awaitable] | None = None,
                 on_failure: Callable[[str], Awaitable] | None = None,
                 on_refused: Callable[[str], Awaitable] | None = None, rate: int = RATE):
        self.service, self.timeout, self.clock = service, timeout, clock
        self.on_words, self.on_failure, self.on_refused = on_words, on_failure, on_refused
        self.stream = WordStream(language, rate=rate)
        self.listener = ListenerClock(rate)
        self.failed = False
        self.wanted_s: float | None = None       # a barge-in waits for the words up to here
        self.changed = asyncio.Event()           # new input for the stream
        self.progress = asyncio.Event()          # a job was applied, or alignment ended
        self.task = asyncio.create_task(self._run())

    def add_text(self, text: str) -> None:
        if not self.failed:                  # its words will never come: nothing is kept for them
            self.stream.add_text(text)

    def close_utterance(self) -> None:
        if not self.failed:
            self.stream.close_utterance()
            self.changed.set()

    def add_audio(self, pcm: np.ndarray, final: bool) -> None:
        """`final`: the utterance's last chunk (may be empty)."""
        if self.failed:
            return
        first = not self.listener.started and len(pcm)
        now = self.clock.monotonic()
        if len(pcm):
            self.listener.add(len(pcm), now)
        self.stream.add_audio(pcm)
        if final:
            self.stream.end_audio()
        if first or final or self.stream.ready(self.listener.played_s(now)):   # not at every chunk: hundreds of streams
            self.changed.set()

    async def settled(self) -> None:
        await self._until(lambda: not self.stream.owes_words)

    async def _until(self, done: Callable[[], bool]) -> None:
        """Waits for `done()`, checked at each applied job, or for alignment to end."""
        while not (done() or self.failed or self.task.done()):
            self.progress.clear()
            await self.progress.wait()

    def lags(self, played_s: float) -> bool:
        """The words known end before `played_s`, and an alignment may still come."""
        return not self.failed and not self.task.done() and played_s > self.stream.covered_s

    async def heard(self, played_s: float) -> None:
        """Until the words known cover `played_s`, the audio received aligned, ready or not (a barge-in's answer;
        at most BARGE_IN_WAIT_S, or the aligner's timeout if shorter)."""
        self.wanted_s = played_s
        self.changed.set()
        with suppress(TimeoutError):
            await self.clock.wait_for(self._until(lambda: self.wanted_s is None or not self.lags(played_s)),
                                      min(BARGE_IN_WAIT_S, self.timeout))

    def spoken_until(self, played_ms: float) -> int | None:
        """The end of the last word heard by `played_ms` in the text added; None: unknown (alignment failed)."""
        return None if self.failed else spoken_until(self.stream.known_words(), played_ms / 1000)

    def close(self) -> None:
        self.task.cancel()

    def _played_s(self) -> float:
        return self.listener.played_s(self.clock.monotonic())

    async def _run(self) -> None:
        try:
            if refused := await self.clock.wait_for(asyncio.wrap_future(self.service.admit()), self.timeout):
                self.failed = True
                if self.on_refused:
                    await self.on_refused(refused)
                return
            while True:
                job = self.stream.job(self._played_s(), force=self.wanted_s is not None and self.lags(self.wanted_s))
                if job is None:
                    self.wanted_s = None           # nothing more to align for a barge-in
                    self.progress.set()
                    self.changed.clear()
                    due = self.stream.due_in(self._played_s()) if self.listener.started else None
                    try:                         # until new input, or until playback makes a job due
                        await self.clock.wait_for(self.changed.wait(), due if due and due > 0 else None)
                    except TimeoutError:
                        pass
                    continue
                due = self.listener.started_at + job.start       # a real-time player reaches the window then
                aligned = self.service.submit(job.audio, [u.text for u in job.units], due)
                spans = await self.clock.wait_for(asyncio.wrap_future(aligned), self.timeout)
                words = self.stream.apply(job, spans)
                self.progress.set()
                if words and self.on_words:
                    await self.on_words(words)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.failed = True
            if self.on_failure:
                await self.on_failure("timed out" if isinstance(exc, TimeoutError) else
                                      f"{exc.__class__.__name__}: {exc}")
        finally:
            self.progress.set()
