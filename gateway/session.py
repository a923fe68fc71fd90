"""One WebSocket: reads client messages, keeps its contexts, writes their audio and events in order."""
import asyncio
import time
import uuid
from collections import OrderedDict

from aligner.bargein import Spoken
from engine import EngineInputError

from . import protocol as p
from .audio import SOURCE_RATE
from .context import Context

REMEMBERED_IDS = 4096        # finished context ids kept to answer late or reused ones


class Session:
    def __init__(self, gateway, websocket, fmt: p.StreamFormat):
        self.gateway, self.ws, self.format = gateway, websocket, fmt
        self.id = uuid.uuid4().hex
        self.contexts: dict[str, Context] = {}
        self.finished_ids: OrderedDict[str, None] = OrderedDict()
        self.lock = asyncio.Lock()
        self.closed = False

    async def run(self) -> None:
        cfg = self.gateway.config
        await self.send(p.Ready(self.id, self.format.sample_rate, self.format.encoding, cfg.max_contexts_per_socket,
                                self.gateway.voices()))
        reaper = asyncio.create_task(self._reap(cfg.context_timeout))
        try:
            while True:
                frame = await self.ws.receive()
                if frame["type"] == "websocket.disconnect":
                    break
                await self._on_frame(frame)
        finally:
            reaper.cancel()
            self.closed = True
            for ctx in list(self.contexts.values()):
                self._retire(ctx)

    async def shutdown(self, reason: str) -> None:
        for ctx in list(self.contexts.values()):
            await self.fail(ctx, p.SHUTTING_DOWN, reason)
        async with self.lock:
            if not self.closed:
                self.closed = True
                try:
                    await self.ws.close(p.CLOSE_GOING_AWAY, reason)
                except Exception:
                    pass                        # the client left first

    # reading -------------------------------------------------------------------------------------------------------
    async def _on_frame(self, frame: dict) -> None:
        try:
            msg = self._parse(frame.get("text"))
        except p.ProtocolError as exc:
            return await self._reject(exc.code, exc.message, exc.context_id)
        try:
            await getattr(self, f"_on_{msg.type}")(msg)
        except (p.ProtocolError, EngineInputError) as exc:
            await self._reject(exc.code, str(exc), msg.context_id)

    def _parse(self, raw: str | None) -> p.ClientMessage:
        limit = self.gateway.config.max_message_bytes
        if raw is None:
            raise p.ProtocolError(p.INVALID_MESSAGE, "binary frames are not accepted: send JSON text frames")
        if len(raw.encode("utf-8")) > limit:
            raise p.ProtocolError(p.MESSAGE_TOO_LARGE, f"message exceeds {limit} bytes: send text in smaller pieces")
        return p.parse_client(raw)

    async def _reject(self, code: str, message: str, context_id: str | None) -> None:
        """An error about a context ends it; one about no context leaves everything as it was."""
        ctx = self.contexts.get(context_id)
        if ctx:
            await self.fail(ctx, code, message)
        else:
            await self.send(p.Error(code, message, code in p.RETRYABLE, context_id))

    async def _on_text(self, msg: p.Text) -> None:
        ctx = self.contexts.get(msg.context_id)
        if ctx:
            return ctx.add_text(msg.text)
        if msg.context_id in self.finished_ids:
            raise p.ProtocolError(p.DUPLICATE_CONTEXT, "context_id was used before on this socket", msg.context_id)
        if self.gateway.draining:
            raise p.ProtocolError(p.SHUTTING_DOWN, "the server is shutting down", msg.context_id)
        if len(self.contexts) >= self.gateway.config.max_contexts_per_socket:
            raise p.ProtocolError(p.TOO_MANY_CONTEXTS, f"at most {self.gateway.config.max_contexts_per_socket} "
                                                       "open contexts per socket", msg.context_id)
        ctx = Context(self, msg)
        try:
            ctx.add_text(msg.text)
        except BaseException:
            ctx.cancel()                        # its word-timestamp task (started with it) ends too
            self._remember(ctx.id)
            raise
        self.contexts[ctx.id] = ctx
        self.gateway.open_contexts += 1
        ctx.task = asyncio.create_task(ctx.run())

    async def _on_flush(self, msg: p.Flush) -> None:
        self._existing(msg.context_id).close_utterance(msg)

    async def _on_end(self, msg: p.End) -> None:
        self._existing(msg.context_id).close_utterance(msg)

    async def _on_cancel(self, msg: p.Cancel) -> None:
        if msg.context_id == p.ALL_CONTEXTS:
            targets = list(self.contexts.values())
        elif msg.context_id in self.finished_ids:
            return                                   # it ended meanwhile; its last message is on the way
        else:
            targets = [self._existing(msg.context_id)]
        for ctx in targets:
            played = msg.played_ms if msg.played_ms is not None else ctx.ms(ctx.samples_sent)
            cancelled = p.Cancelled(ctx.id, played, ctx.ms(ctx.samples_generated, SOURCE_RATE))
            said = Spoken("", 0, "".join(ctx.texts)) if played == 0 else ctx.words.spoken(played) if ctx.words else None
            if said:
                cancelled.spoken_text, cancelled.spoken_until_char, cancelled.unspoken_text = said.text, said.until, \
                    said.rest
            await self.finish(ctx, cancelled)

    async def _on_keepalive(self, msg: p.Keepalive) -> None:
        if msg.context_id is None:
            for ctx in self.contexts.values():
                ctx.touch()
        elif msg.context_id not in self.finished_ids:
            self._existing(msg.context_id).touch()

    def _existing(self, context_id: str) -> Context:
        if context_id in self.contexts:
            return self.contexts[context_id]
        if context_id in self.finished_ids:
            raise p.ProtocolError(p.CONTEXT_ENDED, "the context has ended", context_id)
        raise p.ProtocolError(p.UNKNOWN_CONTEXT, "no such context on this socket; a text message creates one",
                              context_id)

    async def _reap(self, timeout: float) -> None:
        while True:
            await asyncio.sleep(min(1.0, timeout / 4))
            now = time.monotonic()
            for ctx in [c for c in self.contexts.values() if c.idle_seconds(now) > timeout]:
                await self.fail(ctx, p.CONTEXT_TIMEOUT, f"no message for this context in {timeout:g} s")

    # ending contexts ---------------------------------------------------------------------------------------------
    def _retire(self, ctx: Context) -> None:
        ctx.cancel()
        if self.contexts.pop(ctx.id, None) is not None:
            self.gateway.open_contexts -= 1
        self._remember(ctx.id)

    def _remember(self, context_id: str) -> None:
        self.finished_ids[context_id] = None
        while len(self.finished_ids) > REMEMBERED_IDS:
            self.finished_ids.popitem(last=False)

    async def finish(self, ctx: Context, last: p.ServerMessage) -> None:
        """Send the context's last message (done, cancelled, error); nothing of it follows."""
        if ctx.finished:
            return
        self._retire(ctx)
        await self.send(last)

    async def fail(self, ctx: Context, code: str, message: str) -> None:
        await self.finish(ctx, p.Error(code, message, code in p.RETRYABLE, ctx.id))

    # writing -------------------------------------------------------------------------------------------------------
    async def send(self, msg: p.ServerMessage) -> None:
        if isinstance(msg, p.Error):
            self.gateway.metrics.errors[msg.code] += 1
        async with self.lock:
            if not self.closed:
                await self._write(p.encode(msg))

    async def send_event(self, ctx: Context, msg: p.ServerMessage) -> None:
        """A message about a context that is not its last one: dropped once the context has ended."""
        if isinstance(msg, p.Error):
            self.gateway.metrics.errors[msg.code] += 1
        async with self.lock:
            if not (ctx.finished or self.closed):
                await self._write(p.encode(msg))

    async def send_audio(self, ctx: Context, data: bytes) -> None:
        async with self.lock:
            if ctx.finished or self.closed:
                return
            if self.format.audio_format == "binary":
                frame = p.pack_audio(ctx.id, ctx.seq, ctx.samples_sent, data)
            else:
                frame = p.encode(p.Audio(ctx.id, ctx.seq, ctx.samples_sent, data))
            ctx.seq += 1
            ctx.samples_sent += len(data) // ctx.encoder.bytes_per_sample
            ctx.touch()
            await self._write(frame)

    async def _write(self, frame: str | bytes) -> None:
        try:
            await (self.ws.send_text(frame) if isinstance(frame, str) else self.ws.send_bytes(frame))
        except Exception:                       # the client is gone: the reader sees the disconnect and cleans up
            self.closed = True
