"""GatewayClient: many contexts on one socket to the gateway (protocol v1), reconnected on use after a drop."""
import asyncio
import itertools
import uuid

import websockets

from . import protocol as p

from .connection import CONNECTION_LOST, TIMEOUT, Endpoint, GatewayError, log, open_socket, server_messages


class Context:
    """One context on the client's socket: send its text, flush, end or cancel it; read its server messages."""

    def __init__(self, client: "GatewayClient", context_id: str, options: dict, ws):
        self.client, self.id, self.options, self.ws = client, context_id, options, ws
        self.queue: asyncio.Queue[p.ServerMessage] = asyncio.Queue()
        self.text_sent = False
        self.finished = False                          # its last message (done, cancelled, error) was read

    async def text(self, text: str, end: bool = False) -> None:
        """`end`: this text is the last (a first text that ends the context is spoken in the whole-text layout)."""
        first = not self.text_sent
        self.text_sent = True
        options = self.options if first else {}
        await self.client.send(self.ws, p.Text(self.id, text, **options, end=end))

    async def flush(self) -> None:
        if self.text_sent:
            await self.client.send(self.ws, p.Flush(self.id))

    async def end(self) -> None:
        if self.text_sent:
            await self.client.send(self.ws, p.End(self.id))
        else:                                          # the gateway never heard of it: nothing to speak
            self.client.contexts.pop(self.id, None)
            self.queue.put_nowait(p.Done(self.id, 0.0))

    def cancel(self) -> None:
        """Stops it now, without waiting (safe in a cancelled task); the socket stays open."""
        if self.text_sent and not self.finished:
            self.client.send_soon(self.ws, p.Cancel(self.id))
        elif not self.text_sent:
            self.client.contexts.pop(self.id, None)

    async def receive(self, timeout: float | None = None) -> p.ServerMessage:
        try:
            msg = await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            raise GatewayError(TIMEOUT, f"no message for context {self.id} in {timeout:g} s", True) from None
        self.finished = p.ends_context(msg)
        return msg


class GatewayClient:
    """Many contexts on one socket, opened on first use and again after it closed (`retries` times, with backoff).
    A keepalive keeps idle contexts from timing out."""

    def __init__(self, endpoint: Endpoint, *, timeout: float = 10.0, retries: int = 2, backoff: float = 0.25,
                 keepalive: float = 10.0):
        self.endpoint, self.timeout, self.retries, self.backoff, self.keepalive = \
            endpoint, timeout, retries, backoff, keepalive
        self.ws = None
        self.ready: p.Ready | None = None
        self.contexts: dict[str, Context] = {}
        self.lock = asyncio.Lock()
        self.tasks: set[asyncio.Task] = set()

    async def connect(self) -> p.Ready:
        async with self.lock:
            for attempt in itertools.count():
                if self.ws is not None:
                    return self.ready
                try:
                    self.ws, self.ready = await open_socket(self.endpoint, self.timeout)
                except GatewayError as exc:
                    if not exc.retryable or attempt >= self.retries:
                        raise
                    log.warning("gateway connection failed (%s); retrying", exc)
                    await asyncio.sleep(self.backoff * 2 ** attempt)
                    continue
                self.spawn(self._read(self.ws))

    async def open_context(self, context_id: str | None = None, **options) -> Context:
        """A new context on the socket (connecting first); `options` go into its first `text` message."""
        await self.connect()
        ctx = Context(self, context_id or uuid.uuid4().hex, options, self.ws)
        self.contexts[ctx.id] = ctx
        return ctx

    async def send(self, ws, msg: p.ClientMessage) -> None:
        try:
            await ws.send(p.encode(msg))
        except websockets.ConnectionClosed as exc:
            raise GatewayError(CONNECTION_LOST, f"the socket to the gateway closed: {exc}", True) from None

    def send_soon(self, ws, msg: p.ClientMessage) -> None:
        self.spawn(self.send(ws, msg))

    def spawn(self, coro) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception():
            log.warning("gateway client: %s", task.exception())

    async def _read(self, ws) -> None:
        keepalive = asyncio.create_task(self._keep_alive(ws))
        try:
            async for msg in server_messages(ws):
                ctx = self.contexts.get(getattr(msg, "context_id", None))
                if ctx is None:
                    if isinstance(msg, p.Error):
                        log.warning("gateway error: %s: %s", msg.code, msg.message)
                    continue
                ctx.queue.put_nowait(msg)
                if p.ends_context(msg):
                    del self.contexts[ctx.id]
        except websockets.ConnectionClosed:
            pass
        finally:
            keepalive.cancel()
            if self.ws is ws:
                self.ws = None
            lost = f"the socket to the gateway closed ({ws.close_code} {ws.close_reason or ''})".rstrip()
            for ctx in [c for c in self.contexts.values() if c.ws is ws]:
                del self.contexts[ctx.id]
                ctx.queue.put_nowait(p.Error(CONNECTION_LOST, lost, True, ctx.id))

    async def _keep_alive(self, ws) -> None:
        while True:
            await asyncio.sleep(self.keepalive)
            if any(c.ws is ws for c in self.contexts.values()):
                try:
                    await self.send(ws, p.Keepalive())
                except GatewayError:                   # closed: the reader is failing its contexts
                    return

    async def aclose(self) -> None:
        ws, self.ws = self.ws, None
        if ws is not None:
            await ws.close()
        for task in list(self.tasks):
            task.cancel()
