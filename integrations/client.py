"""A framework-free asyncio client of the gateway's WebSocket protocol v1, shared by the LiveKit and Pipecat
integrations: the socket's address and key, the handshake, the speech options of a context, and GatewayClient,
which carries many contexts on one socket (opened on first use, again after it drops) with a queue of server
messages per context. Every message schema comes from gateway/protocol.py."""
import asyncio
import itertools
import logging
import uuid
from dataclasses import fields
from urllib.parse import urlencode, urlsplit

import websockets

from gateway import protocol as p

log = logging.getLogger("qwen_tts_gateway.client")
WEBSOCKET_PATH = "/v1/tts/websocket"
CONNECTION_FAILED, CONNECTION_LOST, TIMEOUT = "connection_failed", "connection_lost", "timeout"   # client-side codes
TERMINAL = (p.Done, p.Cancelled, p.Error)
LANGUAGES = {"zh": "chinese", "en": "english", "de": "german", "it": "italian", "pt": "portuguese", "es": "spanish",
             "ja": "japanese", "ko": "korean", "fr": "french", "ru": "russian"}
SPEECH_OPTIONS = frozenset(f.name for f in fields(p.Text)) - {"context_id", "text"}


class GatewayError(Exception):
    """An error the gateway sent (its code and retryable flag), or a client-side connection failure or timeout."""

    def __init__(self, code: str, message: str, retryable: bool):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.retryable = code, message, retryable


def gateway_language(language: str | None) -> str | None:
    """ISO codes ('en', 'en-US') to the gateway's language names; names ('english', 'auto') pass through."""
    return language and LANGUAGES.get(language.split("-")[0].lower(), language.lower())


def speech_options(**options) -> dict:
    """The settings of a context's first `text` message (None values left out), checked as the gateway checks them."""
    options = {k: v for k, v in options.items() if v is not None}
    try:
        p.parse_client(p.encode(p.Text("check", "", **options)))
    except p.ProtocolError as exc:
        raise ValueError(exc.message) from None
    return options


class Endpoint:
    """The socket's URL (with its audio format) and authorization header."""

    def __init__(self, base_url: str, api_key: str | None = None, sample_rate: int = 24000, encoding: str = "pcm_s16le"):
        url = base_url.rstrip("/").replace("http", "ws", 1) if base_url.startswith("http") else base_url.rstrip("/")
        if urlsplit(url).scheme not in ("ws", "wss"):
            raise ValueError(f"base_url must be ws://, wss://, http:// or https://, not {base_url!r}")
        try:
            fmt = p.StreamFormat.from_query({"sample_rate": str(sample_rate), "encoding": encoding})
        except p.ProtocolError as exc:
            raise ValueError(exc.message) from None
        self.url = f"{url if url.endswith(WEBSOCKET_PATH) else url + WEBSOCKET_PATH}?{urlencode(fmt.to_query())}"
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}


async def handshake(ws, timeout: float) -> p.Ready:
    """The server's first message: `ready`, or the error it refused the socket with (raised as GatewayError)."""
    try:
        msg = p.parse_server(await asyncio.wait_for(ws.recv(), timeout))
    except TimeoutError:
        raise GatewayError(TIMEOUT, f"no ready message from the gateway in {timeout:g} s", True) from None
    except websockets.ConnectionClosed as exc:
        raise GatewayError(CONNECTION_FAILED, f"the gateway closed the socket: {exc}", True) from None
    if isinstance(msg, p.Error):
        raise GatewayError(msg.code, msg.message, msg.retryable)
    if not isinstance(msg, p.Ready) or msg.protocol != p.PROTOCOL_VERSION:
        raise GatewayError(CONNECTION_FAILED, f"not a protocol v{p.PROTOCOL_VERSION} gateway: {msg}", False)
    return msg


async def open_socket(endpoint: Endpoint, timeout: float):
    """A connected socket and its `ready` message."""
    try:
        ws = await websockets.connect(endpoint.url, additional_headers=endpoint.headers, open_timeout=timeout)
    except TimeoutError:
        raise GatewayError(TIMEOUT, f"connecting to {endpoint.url} timed out after {timeout:g} s", True) from None
    except (OSError, websockets.InvalidHandshake) as exc:
        raise GatewayError(CONNECTION_FAILED, f"cannot connect to {endpoint.url}: {exc}", True) from None
    try:
        return ws, await handshake(ws, timeout)
    except GatewayError:
        await ws.close()
        raise


class Context:
    """One context on the client's socket: send its text, flush, end or cancel it; read its server messages."""

    def __init__(self, client: "GatewayClient", context_id: str, options: dict, ws):
        self.client, self.id, self.options, self.ws = client, context_id, options, ws
        self.queue: asyncio.Queue[p.ServerMessage] = asyncio.Queue()
        self.text_sent = False
        self.finished = False                          # its last message (done, cancelled, error) was read

    async def text(self, text: str) -> None:
        first = not self.text_sent
        self.text_sent = True
        await self.client.send(self.ws, p.Text(self.id, text, **self.options) if first else p.Text(self.id, text))

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
        """Stop it now (without waiting: safe in a cancelled task); the socket stays open."""
        if self.text_sent and not self.finished:
            self.client.send_soon(self.ws, p.Cancel(self.id))
        elif not self.text_sent:
            self.client.contexts.pop(self.id, None)

    async def receive(self, timeout: float | None = None) -> p.ServerMessage:
        try:
            msg = await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            raise GatewayError(TIMEOUT, f"no message for context {self.id} in {timeout:g} s", True) from None
        self.finished = isinstance(msg, TERMINAL)
        return msg


class GatewayClient:
    """Many contexts on one socket. The socket opens on first use and again after it closed, retrying a refused or
    failed connection `retries` times with exponential backoff; a keepalive keeps idle contexts from timing out."""

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
        """Routes the socket's messages to their contexts; when it closes, every context on it gets an error."""
        keepalive = asyncio.create_task(self._keep_alive(ws))
        try:
            async for frame in ws:
                try:
                    msg = p.parse_server(frame)
                except (KeyError, TypeError, ValueError) as exc:   # a newer server's message, or a malformed one
                    log.warning("skipping a gateway message: %r", exc)
                    continue
                ctx = self.contexts.get(getattr(msg, "context_id", None))
                if ctx is None:
                    if isinstance(msg, p.Error):
                        log.warning("gateway error: %s: %s", msg.code, msg.message)
                    continue
                ctx.queue.put_nowait(msg)
                if isinstance(msg, TERMINAL):
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
                await self.send(ws, p.Keepalive())

    async def aclose(self) -> None:
        ws, self.ws = self.ws, None
        if ws is not None:
            await ws.close()
        for task in list(self.tasks):
            task.cancel()
