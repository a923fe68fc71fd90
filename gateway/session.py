"""One WebSocket: reads client messages, keeps its contexts, queues their audio and events in order for its writer."""
import asyncio
import logging
import uuid
from collections import OrderedDict

from engine import EngineInputError
from qwen_tts_client import protocol as p

from .codecs import OPUS_PACKET_MS
from .context import Context
from .outbox import Outbox
from .watchdog import watch
from .words import cancelled

log = logging.getLogger("qwen_tts_gateway")
REMEMBERED_IDS = 4096        # finished context ids kept to answer late or reused ones


class Session:
    def __init__(self, gateway, websocket, fmt: p.StreamFormat):
        self.gateway, self.ws, self.format = gateway, websocket, fmt
        self.id = uuid.uuid4().hex
        self.contexts: dict[str, Context] = {}
        self.finished_ids: OrderedDict[str, None] = OrderedDict()
        limits = gateway.config.limits
        self.outbox = Outbox(websocket, limits.max_outbound_seconds, limits.max_outbound_bytes, gateway.clock)
        self.closed = False          # closing or closed: nothing more is queued
        self.closing: asyncio.Task | None = None

    async def run(self) -> None:
        cfg = self.gateway.config
        self.send(p.Ready(self.id, self.format.sample_rate, self.format.encoding, cfg.max_contexts_per_socket,
                          self.gateway.voices(), packet_ms=OPUS_PACKET_MS if self.format.encoding == "opus" else None))
        reaper = asyncio.create_task(watch(self))
        stopped = asyncio.create_task(self.outbox.finished.wait())
        reading = asyncio.create_task(self._read())
        try:
            await asyncio.wait((reading, stopped), return_when=asyncio.FIRST_COMPLETED)
            if not reading.done():               # the writer closed the socket (slow consumer, failed write)
                reading.cancel()
            else:
                reading.result()
        except Exception:
            log.exception("session %s failed", self.id)
            self.send(p.Error(p.INTERNAL, "internal error; reconnect", True))
            await self._close(p.CLOSE_INTERNAL, "internal error")
        finally:
            reaper.cancel()
            stopped.cancel()
            reading.cancel()
            self.closed = True
            for ctx in list(self.contexts.values()):
                self._retire(ctx)
            self.outbox.stop()

    async def _read(self) -> None:
        """One task for the socket's life: a frame costs no task of its own."""
        while (frame := await self.ws.receive())["type"] != "websocket.disconnect":
            self._on_frame(frame)

    async def shutdown(self, reason: str, code: str = p.SHUTTING_DOWN) -> None:
        """Every context ends with `code`; then the close: 1001 (shutting down) or 1011 after an `internal` error."""
        for ctx in list(self.contexts.values()):
            self.fail(ctx, code, reason)
        if code == p.INTERNAL:
            self.send(p.Error(p.INTERNAL, reason, True))
        await self._close(p.CLOSE_INTERNAL if code == p.INTERNAL else p.CLOSE_GOING_AWAY, reason)

    async def _close(self, code: int, reason: str) -> None:
        if not self.closed:
            self.closed = True
            await self.outbox.close(code, reason)

    def _on_frame(self, frame: dict) -> None:
        try:
            msg = self._parse(frame.get("text"))
        except p.ProtocolError as exc:
            return self._reject(exc.code, exc.message, exc.context_id)
        try:
            self.handlers[type(msg)](self, msg)
        except (p.ProtocolError, EngineInputError) as exc:
            self._reject(exc.code, str(exc), msg.context_id)
        except Exception:                    # a fault of ours: it ends that context only, the socket stays
            log.exception("session %s: a %s message failed", self.id, msg.type)
            self._reject(p.INTERNAL, "internal error; retry", msg.context_id)

    def _parse(self, raw: str | None) -> p.ClientMessage:
        limit = self.gateway.config.max_message_bytes
        if raw is None:
            raise p.ProtocolError(p.INVALID_MESSAGE, "binary frames are not accepted: send JSON text frames")
        if len(raw) * 4 > limit and len(raw.encode("utf-8")) > limit:      # (4 bytes a character at most)
            raise p.ProtocolError(p.MESSAGE_TOO_LARGE, f"message exceeds {limit} bytes: send text in smaller pieces")
        return p.parse_client(raw)

    def _reject(self, code: str, message: str, context_id: str | None) -> None:
        """An error about a context ends it; one about no context leaves everything as it was."""
        ctx = self.contexts.get(context_id)
        if ctx:
            self.fail(ctx, code, message)
        else:
            self.send(p.Error(code, message, code in p.RETRYABLE, context_id))

    def _on_text(self, msg: p.Text) -> None:
        ctx = self.contexts.get(msg.context_id)
        if ctx:
            return None if ctx.cancelling else ctx.add_text(msg.text, msg.end)   # sent before it saw `cancelled`
        if msg.context_id in self.finished_ids:
            raise p.ProtocolError(p.DUPLICATE_CONTEXT, "context_id was used before on this socket", msg.context_id)
        if self.gateway.draining:
            raise p.ProtocolError(p.SHUTTING_DOWN, "the server is shutting down", msg.context_id)
        if len(self.contexts) - self.cancelling() >= self.gateway.config.max_contexts_per_socket:
            raise p.ProtocolError(p.TOO_MANY_CONTEXTS, f"at most {self.gateway.config.max_contexts_per_socket} "
                                                       "open contexts per socket", msg.context_id)
        ctx = Context(self, msg)
        try:
            ctx.add_text(msg.text, msg.end)
        except BaseException:
            ctx.cancel()                        # its word-timestamp task (started with it) ends too
            self._remember(ctx.id)
            raise
        self.contexts[ctx.id] = ctx
        self.gateway.open_contexts += 1
        ctx.task = asyncio.create_task(ctx.run())

    def _on_flush(self, msg: p.Flush | p.End) -> None:
        if not (ctx := self._existing(msg.context_id)).cancelling:
            ctx.close_utterance(msg)

    def _on_cancel(self, msg: p.Cancel) -> None:
        if msg.context_id == p.ALL_CONTEXTS:
            targets = list(self.contexts.values())
        elif msg.context_id in self.finished_ids:
            return                                   # it ended meanwhile; its last message is on the way
        else:
            targets = [self._existing(msg.context_id)]
        for ctx in targets:
            if ctx.cancelling:
                continue                                           # its answer waits for its words already
            answer = cancelled(ctx, msg.played_ms)
            # a position the client gives, past the words aligned: the audio stops now, the answer waits for them
            if msg.played_ms is not None and ctx.words and ctx.words.lags(msg.played_ms / 1000) and \
                    self.cancelling() < self.gateway.config.max_contexts_per_socket:
                ctx.stop_audio()
                ctx.touch()                                        # its wait is not idleness
                ctx.cancelling, ctx.task = True, asyncio.create_task(self._cancel_when_heard(ctx, answer))
            else:
                self.finish(ctx, answer)

    def cancelling(self) -> int:
        return sum(ctx.cancelling for ctx in self.contexts.values())

    async def _cancel_when_heard(self, ctx: Context, answer: p.Cancelled) -> None:
        """`answer`: from the words known at the cancel, sent if the alignment fails meanwhile."""
        try:
            await ctx.words.heard(answer.played_ms / 1000)
            self.finish(ctx, answer if ctx.words.failed else cancelled(ctx, answer.played_ms))
        except Exception:
            log.exception("context %s: its cancel's answer failed", ctx.id)
            self.fail(ctx, p.INTERNAL, "the cancel's answer failed; the context is stopped")

    def _on_keepalive(self, msg: p.Keepalive) -> None:
        if msg.context_id is None:
            for ctx in self.contexts.values():
                ctx.touch()
        elif msg.context_id not in self.finished_ids:
            self._existing(msg.context_id).touch()

    handlers = {p.Text: _on_text, p.Flush: _on_flush, p.End: _on_flush, p.Cancel: _on_cancel,
                p.Keepalive: _on_keepalive}

    def _existing(self, context_id: str) -> Context:
        if context_id in self.contexts:
            return self.contexts[context_id]
        if context_id in self.finished_ids:
            raise p.ProtocolError(p.CONTEXT_ENDED, "the context has ended", context_id)
        raise p.ProtocolError(p.UNKNOWN_CONTEXT, "no such context on this socket; a text message creates one",
                              context_id)

    def _retire(self, ctx: Context) -> None:
        ctx.cancel()
        if self.contexts.pop(ctx.id, None) is not None:
            self.gateway.open_contexts -= 1
        self._remember(ctx.id)

    def _remember(self, context_id: str) -> None:
        self.finished_ids[context_id] = None
        while len(self.finished_ids) > REMEMBERED_IDS:
            self.finished_ids.popitem(last=False)

    def finish(self, ctx: Context, last: p.ServerMessage) -> None:
        if ctx.finished:
            return
        self._retire(ctx)
        self.send(last)

    def fail(self, ctx: Context, code: str, message: str) -> None:
        self.finish(ctx, p.Error(code, message, code in p.RETRYABLE, ctx.id))

    def drop_slow_consumer(self) -> None:
        """Every context ends and untaken frames are dropped; errors and the close (1008) follow if the client reads."""
        self.outbox.drop()
        message = "the client fell too far behind its audio (a slow consumer): read the socket as frames arrive"
        for ctx in list(self.contexts.values()):
            self.fail(ctx, p.SLOW_CONSUMER, message)
        self.closing = asyncio.create_task(self._close(p.CLOSE_POLICY, "slow consumer"))

    def send(self, msg: p.ServerMessage) -> None:
        if isinstance(msg, p.Error):
            self.gateway.metrics.errors[msg.code] += 1
        self.queue(p.encode(msg))

    def send_event(self, ctx: Context, msg: p.ServerMessage) -> None:
        """A message about a context that is not its last one: dropped once the context has ended."""
        if not ctx.finished:
            self.send(msg)

    def queue(self, frame: str | bytes, due: float | None = None) -> None:
        if not self.closed and not self.outbox.put(frame, due):
            self.drop_slow_consumer()
