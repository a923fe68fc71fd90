"""One context of a socket: its utterances in order (each one engine request), with seq and sample offsets kept
across them. The session calls the message methods; run() is the context's task that streams the audio out."""
import asyncio
import logging
import time
from collections import deque
from contextlib import aclosing, suppress
from dataclasses import dataclass, field

import numpy as np

from engine import EngineInputError, SamplingParams, SynthesisRequest

from . import protocol as p
from .audio import AudioEncoder
from .streams import EngineStream
from .words import context_words

log = logging.getLogger("qwen_tts_gateway")
SAMPLING_FIELDS = ("temperature", "top_k", "top_p", "repetition_penalty", "seed")


@dataclass
class Utterance:
    """Text up to a flush or end; it is spoken by one engine request, started when the previous one is done."""
    first_text_at: float = field(default_factory=time.monotonic)
    parts: list[str] = field(default_factory=list)
    chars: int = 0
    closer: p.Flush | p.End | None = None
    flush_id: int = 0
    stream: EngineStream | None = None
    truncated: bool = False          # the engine stopped it (frame cap) before it was closed: later text is dropped

    @property
    def blank(self) -> bool:
        return not "".join(self.parts).strip()


class Context:
    def __init__(self, session, settings: p.Text):
        self.session, self.settings, self.id = session, settings, settings.context_id
        fmt = session.format
        self.encoder = AudioEncoder(fmt.sample_rate, fmt.encoding)
        self.utterances: deque[Utterance] = deque()
        self.texts: list[str] = []       # every text message, in order: the context's text
        gw = session.gateway
        self.words = context_words(self, gw.aligner, gw.config.aligner_timeout) \
            if gw.aligner is not None and settings.word_timestamps else None
        self.ended = False               # `end` received
        self.finished = False            # its last message is sent: no more audio
        self.seq = self.samples_sent = self.samples_generated = self.flushes = 0
        self.last_activity = time.monotonic()
        self.changed = asyncio.Event()
        self.task: asyncio.Task | None = None   # run(), referenced here so that it is not collected

    # messages (called by the session; raise ProtocolError / EngineInputError, which end the context) ------------
    def add_text(self, text: str) -> None:
        self._check_open()
        utterance = self._open_utterance()
        limit = self.session.gateway.config.max_utterance_chars
        if utterance.chars + len(text) > limit:
            raise p.ProtocolError(p.TEXT_TOO_LONG, f"an utterance holds at most {limit} characters: flush to start "
                                                   "the next one", self.id)
        utterance.chars += len(text)
        utterance.parts.append(text)
        self.texts.append(text)
        if self.words:
            self.words.add_text(text)
        if utterance.stream and not utterance.truncated:
            utterance.stream.append(text)
        self._start_next()
        self.changed.set()

    def close_utterance(self, closer: p.Flush | p.End) -> None:
        self._check_open()
        utterance = self._open_utterance()
        utterance.closer = closer
        if self.words:
            self.words.close_utterance()
        if isinstance(closer, p.End):
            self.ended = True
        else:
            self.flushes += 1
            utterance.flush_id = self.flushes
        if utterance.stream and not utterance.truncated:
            utterance.stream.cancel() if utterance.blank else utterance.stream.close()
        self._start_next()
        self.changed.set()

    def cancel(self) -> None:
        self.finished = True
        if self.words:
            self.words.close()
        for utterance in self.utterances:
            if utterance.stream:
                utterance.stream.cancel()
        self.utterances.clear()
        self.changed.set()

    def touch(self) -> None:
        self.last_activity = time.monotonic()

    def idle_seconds(self, now: float) -> float:
        return 0.0 if self.owes_audio else now - self.last_activity

    @property
    def owes_audio(self) -> bool:
        """Closed text not fully spoken yet: the client waits for us, not we for it."""
        return any(u.closer for u in self.utterances)

    def ms(self, samples: int, rate: int | None = None) -> float:
        return round(samples * 1000 / (rate or self.session.format.sample_rate), 3)

    def _check_open(self) -> None:
        if self.ended:
            raise p.ProtocolError(p.CONTEXT_ENDED, "the context was ended; start a new context", self.id)

    def _open_utterance(self) -> Utterance:
        self.touch()
        if not self.utterances or self.utterances[-1].closer:
            self.utterances.append(Utterance())
        return self.utterances[-1]

    def _start_next(self) -> None:
        head = self.utterances[0] if self.utterances else None
        if head is None or head.stream or not head.parts or head.closer and head.blank:
            return
        s, gw = self.settings, self.session.gateway
        sampling = SamplingParams(**{k: getattr(s, k) for k in SAMPLING_FIELDS if getattr(s, k) is not None})
        request = SynthesisRequest(text="".join(head.parts), voice=s.voice, language=s.language or "auto",
                                   instruct=s.instruct, sampling=sampling, max_frames=gw.config.max_frames,
                                   text_complete=head.closer is not None)
        head.stream = EngineStream(gw.engine, gw.metrics, request, "websocket", head.first_text_at)

    # the context's task -------------------------------------------------------------------------------------------
    async def run(self) -> None:
        try:
            while await self._wait(self._head_ready):
                head = self.utterances[0]
                if head.stream:
                    await self._speak(head)
                if not await self._wait(lambda: head.closer):
                    return
                self.utterances.popleft()
                if self.words:
                    if head.stream is None:
                        self.words.add_audio(np.zeros(0, np.float32), final=True)
                    with suppress(p.ProtocolError, EngineInputError):   # raised again below, after `flushed`
                        self._start_next()       # the next utterance does not wait for this one's words
                    await self.words.settled()
                if isinstance(head.closer, p.End):
                    await self.session.finish(self, p.Done(self.id, self.ms(self.samples_sent)))
                    return
                await self.session.send(p.Flushed(self.id, head.flush_id))
                self._start_next()
        except (p.ProtocolError, EngineInputError) as exc:
            if not self.finished:
                await self.session.fail(self, exc.code, str(exc))
        except Exception:
            if not self.finished:
                log.exception("context %s failed", self.id)
                await self.session.fail(self, p.INTERNAL, "the engine failed this request; retry")

    def _head_ready(self) -> bool:
        return bool(self.utterances) and bool(self.utterances[0].stream or self.utterances[0].closer)

    async def _wait(self, ready) -> bool:
        """Until ready() (True) or the context is finished (False)."""
        while not self.finished and not ready():
            self.changed.clear()
            await self.changed.wait()
        return not self.finished

    async def _speak(self, utterance: Utterance) -> None:
        async with aclosing(utterance.stream.chunks()) as chunks:
            async for chunk in chunks:
                if self.finished:
                    return
                self.samples_generated += len(chunk.pcm)
                if self.words:
                    self.words.add_audio(chunk.pcm, chunk.final)
                data = self.encoder.encode(chunk.pcm) + (self.encoder.finish() if chunk.final else b"")
                if data:
                    await self.session.send_audio(self, data)
        if not utterance.closer:
            utterance.truncated = True
            log.info("context %s: utterance stopped by the frame cap (%s)", self.id, utterance.stream.finish_reason)
