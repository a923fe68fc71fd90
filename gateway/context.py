"""One context of a socket: its utterances in order, an engine request each, seq and sample offsets across them."""
import asyncio
import logging
from collections import deque
from contextlib import aclosing, suppress

import numpy as np

from engine import EngineInputError
from engine.core.listener_clock import ListenerClock
from qwen_tts_client import protocol as p

from .audio import AudioEncoder
from .client_text import ClientText
from .utterance import Utterance
from .words import context_words

log = logging.getLogger("qwen_tts_gateway")


class Context:
    def __init__(self, session, settings: p.Text):
        self.session, self.settings, self.id = session, settings, settings.context_id
        self.clock, fmt = session.gateway.clock, session.format
        self.encoder = AudioEncoder(fmt.sample_rate, fmt.encoding, session.gateway.engine.info["sample_rate"])
        self.utterances: deque[Utterance] = deque()
        self.text = ClientText(settings)     # as sent, and as spoken
        gw = session.gateway
        self.words = context_words(self, gw.aligner, gw.aligner_timeout) \
            if gw.aligner is not None and settings.word_timestamps else None
        self.ended = False               # `end` received
        self.finished = False            # its last message is sent: no more audio
        self.cancelling = False          # cancelled, its answer waiting for the words of the audio played
        self.seq = self.samples_sent = self.samples_generated = self.flushes = 0
        self.pending_chars = 0           # held against --max-pending-chars: its utterances not spoken yet
        self.last_activity = self.clock.monotonic()
        self.listener = ListenerClock(fmt.sample_rate)     # when a real-time player of the context needs each chunk
        self.changed = asyncio.Event()
        self.task: asyncio.Task | None = None   # run(), referenced here so that it is not collected

    def add_text(self, text: str, end: bool = False) -> None:
        self._check_open()
        utterance = self._open_utterance()
        n, limit = len(text), self.session.gateway.config.max_utterance_chars
        if utterance.chars + n > limit:
            raise p.ProtocolError(p.TEXT_TOO_LONG, f"an utterance holds at most {limit} characters: flush to start "
                                                   "the next one", self.id)
        self._hold(n)
        utterance.chars += n
        utterance.last_activity = self.last_activity        # (touched as it was opened)
        self._add_spoken(utterance, self.text.add(text))
        if end:
            return self.close_utterance(p.End(self.id))     # closed before it starts: its engine request is whole
        self._start_next()
        self.changed.set()

    def _add_spoken(self, utterance: Utterance, text: str) -> None:
        if text:
            utterance.add(text)
            if self.words:
                self.words.add_text(text)

    def close_utterance(self, closer: p.Flush | p.End) -> None:
        self._check_open()
        utterance = self._open_utterance()
        self._add_spoken(utterance, self.text.close())
        if self.words:
            self.words.close_utterance()
        if isinstance(closer, p.End):
            self.ended = True
        else:
            self.flushes += 1
            utterance.flush_id = self.flushes
        utterance.close(closer)
        self._start_next()
        self.changed.set()

    def release_if_idle(self, now: float, after: float) -> None:
        if self.utterances and self.utterances[0].release_if_idle(now, after):
            if self.words:
                self.words.close_utterance()
            self.changed.set()

    def cancel(self) -> None:
        self.finished = True
        if self.words:
            self.words.close()
        self.stop_audio()

    def stop_audio(self) -> None:
        """No more audio or text: its engine requests end (a barge-in whose answer waits for its words)."""
        self.ended = True
        for utterance in self.utterances:
            if utterance.stream:
                utterance.stream.cancel()
        self.utterances.clear()
        self.pending_chars = 0
        self.changed.set()
        if self.task is not None and self.task is not asyncio.current_task():
            self.task.cancel()              # not left waiting on a chunk when the loop closes

    def touch(self) -> None:
        self.last_activity = self.clock.monotonic()

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
            self._hold(1)
            self.utterances.append(Utterance(last_activity=self.last_activity))
        return self.utterances[-1]

    def _hold(self, n: int) -> None:
        limits = self.session.gateway.config.limits
        socket = sum(c.pending_chars for c in self.session.contexts.values() if c is not self) + self.pending_chars
        if self.pending_chars + n > limits.max_pending_chars or socket + n > limits.max_pending_chars_per_socket:
            raise p.ProtocolError(p.TOO_MUCH_PENDING_TEXT, f"at most {limits.max_pending_chars} characters per "
                                  f"context ({limits.max_pending_chars_per_socket} per socket) may wait to be spoken: "
                                  "send text as it is spoken", self.id)
        self.pending_chars += n

    def _start_next(self) -> None:
        head = self.utterances[0] if self.utterances else None
        if head is not None and not head.stream and head.parts and not (head.closer and head.blank) \
                and (head.closer or self.settings.text_layout != "whole"):
            head.start(self.settings, self.session.gateway)

    async def run(self) -> None:
        try:
            while await self._wait(self._head_ready):
                head = self.utterances[0]
                if head.stream:
                    await self._speak(head)
                if not await self._wait(lambda: head.closer):
                    return
                self.utterances.popleft()
                self.pending_chars -= head.pending_chars
                if self.words:
                    if head.stream is None:
                        self.words.add_audio(np.zeros(0, np.float32), final=True)
                    with suppress(p.ProtocolError, EngineInputError):   # raised again below, after `flushed`
                        self._start_next()       # the next utterance does not wait for this one's words
                    await self.words.settled()
                if isinstance(head.closer, p.End):
                    return self.session.finish(self, p.Done(self.id, self.ms(self.samples_sent)))
                if not head.released:
                    self.session.send(p.Flushed(self.id, head.flush_id))
                self._start_next()
        except (p.ProtocolError, EngineInputError) as exc:
            if not self.finished:
                self.session.fail(self, exc.code, str(exc))
        except Exception:
            if not self.finished:
                log.exception("context %s failed", self.id)
                self.session.fail(self, p.INTERNAL, "the engine failed this request; retry")

    def _head_ready(self) -> bool:
        return bool(self.utterances) and bool(self.utterances[0].stream or self.utterances[0].closer)

    async def _wait(self, ready) -> bool:
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
                utterance.last_activity = self.clock.monotonic()
                if self.words:
                    self.words.add_audio(chunk.pcm, chunk.final)
                for data, samples in await self.encoder.encode_async(chunk.pcm, chunk.final):
                    if not self.finished:               # cancelled while Opus was encoding in a thread
                        self._send_audio(data, samples)
        if not utterance.closer:
            utterance.truncated = True
            log.info("context %s: utterance stopped by the frame cap (%s)", self.id, utterance.stream.finish_reason)

    def _send_audio(self, data: bytes, samples: int) -> None:
        fmt = self.session.format
        if fmt.audio_format == "binary":
            frame = p.pack_audio(self.id, self.seq, self.samples_sent, data)
        else:
            frame = p.encode(p.Audio(self.id, self.seq, self.samples_sent, data))
        self.seq += 1
        self.samples_sent += samples
        self.touch()
        self.session.queue(frame, self.listener.add(samples, self.clock.monotonic()))
