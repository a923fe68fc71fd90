"""One load-bench WebSocket: contexts multiplexed on it, each speaking one text (whole or streamed), recorded."""
import asyncio
import itertools
import random
import time
from collections import Counter
from contextlib import suppress
from dataclasses import dataclass, field

import websockets

from bench.languages import pieces as language_pieces
from bench.metrics import StreamRecord
from qwen_tts_client import protocol as p

CONNECT_TRIES = 20           # a socket refused with a retryable error (busy, not_ready) is tried again, 0.5 s apart


@dataclass
class Speech:
    """How every context speaks: its first `text` message's settings, and the text whole or in timed pieces."""
    options: dict
    stream_chars: int = 0    # 0: the whole text in one message
    stream_ms: float = 15.0
    idle_timeout: float = 60.0
    lang: str | None = None  # streamed as an LLM writes this language (bench/languages.py), every piece_ms apart
    piece_ms: tuple[float, float] = (20.0, 30.0)
    pieces: str = "chars"    # with lang: "tokens", a Qwen LLM's tokens (bench/languages.py)
    barge_in_ms: float = 0.0  # each context cancelled once a player from its first chunk played this much (0: never)

    def timed_pieces(self, text: str, rng: random.Random) -> list[tuple[float, str]]:
        """(seconds after the first piece, piece)."""
        if self.lang is None:
            n = self.stream_chars or len(text)
            return [(i * self.stream_ms / 1000, text[i * n:(i + 1) * n]) for i in range((len(text) + n - 1) // n)]
        parts = language_pieces(text, self.lang, rng, self.pieces)
        gaps = itertools.accumulate([0.0] + [rng.uniform(*self.piece_ms) / 1000 for _ in parts[1:]])
        return list(zip(gaps, parts))


@dataclass
class Tally:
    """One client process's steady-state window (perf_counter), the audio that arrived inside it, and the errors
    about no context (a message the server refused, or a socket it refused or closed)."""
    start: float = float("inf")
    end: float = float("inf")
    audio_s: float = 0.0
    stray_errors: Counter = field(default_factory=Counter)


class Context:
    def __init__(self, cid: str, rate: int, chars: int):
        self.id, self.record = cid, StreamRecord(0.0, chars=chars, rate=rate)    # submitted: at its first text
        self.code: str | None = None                     # how it ended: None (done) or an error code
        self.error: tuple[float, str] | None = None      # its error: seconds after its first text, and the message
        self.words_error: str | None = None              # alignment_unavailable or words_refused
        self.words_reason = ""                           # its message
        self.next_offset, self.last_message = 0, time.perf_counter()
        self.cancel_sent: float | None = None
        self.ended = asyncio.get_running_loop().create_future()
        self.heard = asyncio.get_running_loop().create_future()     # its first chunk came

    def finish(self, code: str | None) -> None:
        if not self.ended.done():
            self.code = code
            self.ended.set_result(None)

    async def wait(self, idle_timeout: float) -> None:
        while not self.ended.done():
            try:
                await asyncio.wait_for(asyncio.shield(self.ended), idle_timeout)
            except TimeoutError:
                if time.perf_counter() - self.last_message > idle_timeout:
                    self.finish("client_timeout")


class LoadSocket:
    def __init__(self, ws, ready: p.Ready, tally: Tally, wire):
        self.ws, self.tally, self.max_contexts, self.wire = ws, tally, ready.max_contexts, wire
        self.rate, self.bytes_per_sample = ready.sample_rate, 2 if ready.encoding == "pcm_s16le" else 1
        self.packet_samples = ready.packet_ms and ready.sample_rate * ready.packet_ms // 1000     # opus: per message
        self.contexts: dict[str, Context] = {}
        self.ids = itertools.count()
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, url: str, headers: dict, compression: str | None, tally: Tally, wire) -> "LoadSocket":
        """`wire`: what the socket speaks (bench/load_dialects.py)."""
        for _ in range(CONNECT_TRIES):
            try:
                ws = await websockets.connect(url, additional_headers=headers, compression=compression, proxy=None,
                                              max_size=None, ping_interval=None, open_timeout=60, close_timeout=2)
            except websockets.InvalidStatus as exc:      # a dialect's refusal is its handshake's status
                ready = p.Error(str(exc.response.status_code), exc.response.body.decode(errors="replace"),
                                exc.response.status_code in (429, 503))
            else:
                ready = await wire.ready(ws)
                if isinstance(ready, p.Ready):
                    return cls(ws, ready, tally, wire)
                await ws.close()
            if not ready.retryable:
                raise RuntimeError(f"the server refused a socket: {ready.code}: {ready.message}")
            await asyncio.sleep(0.5)
        raise RuntimeError(f"the server refused a socket {CONNECT_TRIES} times: {ready.code}")

    def open_context(self, chars: int) -> Context:
        """A new context on this socket, counted at once in its open contexts."""
        ctx = Context(f"c{next(self.ids)}", self.rate, chars)
        self.contexts[ctx.id] = ctx
        return ctx

    async def speak(self, ctx: Context, text: str, speech: Speech) -> Context:
        """Sends `text` whole in a message that ends the context, or in timed pieces as an LLM streams it (Speech),
        then `end`; returns once the context has ended."""
        pieces = speech.timed_pieces(text, random.Random(f"{ctx.id}{text}"))
        whole = not speech.stream_chars
        barge = asyncio.create_task(self._barge_in(ctx, speech.barge_in_ms)) if speech.barge_in_ms else None
        try:
            ctx.record.submitted = start = time.perf_counter()
            for i, (at, piece) in enumerate(pieces):
                if i:
                    await asyncio.sleep(start + at - time.perf_counter())
                if ctx.ended.done():                     # refused or failed: the rest would only get errors
                    break
                for frame in self.wire.text(ctx.id, piece, i == 0, end=whole):
                    await self.ws.send(frame)
            if not ctx.ended.done() and not whole:
                for frame in self.wire.end(ctx.id):
                    await self.ws.send(frame)
            await ctx.wait(speech.idle_timeout)
            if ctx.code == "client_timeout":
                for frame in self.wire.cancel(ctx.id):
                    await self.ws.send(frame)
        except websockets.ConnectionClosed:
            ctx.finish("socket_closed")
        finally:
            self.contexts.pop(ctx.id, None)
            if barge is not None:
                barge.cancel()
        return ctx

    async def _barge_in(self, ctx: Context, played_ms: float) -> None:
        """Cancels `ctx` once a real-time player from its first chunk has played `played_ms`, unless it ended."""
        await asyncio.wait((ctx.ended, ctx.heard), return_when=asyncio.FIRST_COMPLETED)
        if not ctx.ended.done():
            await asyncio.sleep(ctx.record.arrivals[0] + played_ms / 1000 - time.perf_counter())
        if not ctx.ended.done():
            ctx.cancel_sent = time.perf_counter()
            with suppress(websockets.ConnectionClosed):
                for frame in self.wire.cancel(ctx.id, played_ms):
                    await self.ws.send(frame)

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                now = time.perf_counter()
                for msg in self.wire.decode(frame):
                    ctx = self.contexts.get(getattr(msg, "context_id", None))
                    if isinstance(msg, p.Error) and msg.context_id is None:
                        self.tally.stray_errors[msg.code] += 1
                    elif ctx is not None and not ctx.ended.done():
                        self._on_message(ctx, msg, now)
        except websockets.ConnectionClosed:
            pass
        finally:
            for ctx in list(self.contexts.values()):
                ctx.finish("socket_closed")

    def _on_message(self, ctx: Context, msg: p.ServerMessage, now: float) -> None:
        ctx.last_message = now
        if isinstance(msg, p.Audio):
            samples = self.packet_samples or len(msg.data) // self.bytes_per_sample
            if msg.sample_offset != ctx.next_offset & 0xFFFFFFFF:
                return ctx.finish("sample_gap")          # the stream lost or repeated audio: a server bug
            ctx.next_offset += samples
            ctx.record.arrivals.append(now)
            if not ctx.heard.done():
                ctx.heard.set_result(None)
            ctx.record.samples.append(samples)
            if self.tally.start <= now < self.tally.end:
                self.tally.audio_s += samples / self.rate
        elif isinstance(msg, p.Words):
            ctx.record.words.extend((now, end) for end in msg.end)
        elif isinstance(msg, p.Error) and msg.code in p.WORDS_ONLY:
            ctx.words_error, ctx.words_reason = msg.code, msg.message
        elif isinstance(msg, p.Error):
            ctx.error = (now - ctx.record.submitted, msg.message)
            ctx.finish(msg.code)
        elif isinstance(msg, p.Done):
            ctx.finish(None if ctx.record.arrivals else "no_audio")
        elif isinstance(msg, p.Cancelled):
            if ctx.cancel_sent is not None:
                ctx.record.cancel_answer_s = now - ctx.cancel_sent
                ctx.record.spoken_known = msg.spoken_until_char is not None
            ctx.finish("cancelled")

    async def close(self) -> None:
        await self.ws.close()
        await self.reader
