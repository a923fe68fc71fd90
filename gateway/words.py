"""Word timestamps of one context. Its text and audio feed a WordStream; a task runs the stream's alignment jobs
through the shared AlignmentService, one at a time, and sends `words` events as words settle. A slow or failing
aligner costs only the words (one `alignment_unavailable` error, then none): the audio never waits for it."""
import asyncio
import logging

import numpy as np

from aligner import WordStream, spoken
from aligner.bargein import Spoken

from . import protocol as p

log = logging.getLogger("qwen_tts_gateway")
NO_AUDIO = np.zeros(0, np.float32)


class ContextWords:
    def __init__(self, ctx, service, timeout: float):
        self.ctx, self.service, self.timeout = ctx, service, timeout
        self.stream = WordStream(ctx.settings.language or "auto")
        self.failed = False
        self.changed = asyncio.Event()           # new input for the stream
        self.progress = asyncio.Event()          # a job was applied, or alignment failed
        self.task = asyncio.create_task(self._run())

    def add_text(self, text: str) -> None:
        self.stream.add_text(text)

    def close_utterance(self) -> None:
        self.stream.close_utterance()
        self.changed.set()

    def add_audio(self, pcm: np.ndarray, final: bool) -> None:
        """A chunk of the speaking utterance (24 kHz); `final`: its last one (an utterance without audio: NO_AUDIO)."""
        self.stream.add_audio(pcm)
        if final:
            self.stream.end_audio()
        self.changed.set()

    async def settled(self) -> None:
        """Until the words of every utterance whose audio is complete are sent, or alignment failed."""
        while self.stream.pending and not (self.failed or self.ctx.finished or self.task.done()):
            self.progress.clear()
            await self.progress.wait()

    def spoken(self, played_ms: float) -> Spoken | None:
        return None if self.failed else spoken(self.stream.text, self.stream.known_words(), played_ms / 1000)

    def close(self) -> None:
        self.task.cancel()

    async def _run(self) -> None:
        try:
            while not self.ctx.finished:
                job = self.stream.job()
                if job is None:                  # (job() itself settles an utterance with nothing to align)
                    self.progress.set()
                    self.changed.clear()
                    await self.changed.wait()
                    continue
                future = self.service.submit(job.audio, [u.text for u in job.units])
                words = self.stream.apply(job, await asyncio.wait_for(asyncio.wrap_future(future), self.timeout))
                self.progress.set()
                if words:
                    await self.ctx.session.send_event(self.ctx, p.Words(
                        self.ctx.id, [w.word for w in words], [round(w.start, 3) for w in words],
                        [round(w.end, 3) for w in words], [w.char_start for w in words], [w.char_end for w in words]))
        except Exception as exc:
            self.failed = True
            reason = "timed out" if isinstance(exc, TimeoutError) else f"{exc.__class__.__name__}: {exc}"
            log.warning("context %s: word alignment unavailable (%s)", self.ctx.id, reason)
            await self.ctx.session.send_event(self.ctx, p.Error(
                p.ALIGNMENT_UNAVAILABLE, f"word timestamps are unavailable for this context ({reason}); its audio "
                                         "continues", False, self.ctx.id))
        finally:
            self.progress.set()
