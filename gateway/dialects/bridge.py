"""A vendor's WebSocket dialect over our own sessions: the socket a Session reads and writes, translated both ways."""
import asyncio
import json
from collections import deque
from contextlib import suppress

from starlette.responses import JSONResponse
from starlette.websockets import WebSocket

from qwen_tts_client import protocol as p

from ..http_api import STATUS, ApiError


class DialectError(ApiError):
    """A dialect message we cannot honour: answered in the dialect's error shape, the socket stays open."""

    def __init__(self, code: str, message: str, context_id: str | None = None):
        super().__init__(code, message)
        self.context_id = context_id


def json_body(text: str | None) -> dict:
    if text is None:
        raise DialectError(p.INVALID_MESSAGE, "binary frames are not accepted: send JSON text frames")
    try:
        body = json.loads(text)
    except ValueError:
        raise DialectError(p.INVALID_JSON, "the message is not valid JSON") from None
    if not isinstance(body, dict):
        raise DialectError(p.INVALID_MESSAGE, "the message must be a JSON object")
    return body


class DialectSocket:
    """What Session takes for its WebSocket: our messages in, the dialect's out, one lock for the real socket's sends.

    `dialect` turns a client frame into our client messages (from_client), our audio into its own (encoded, awaited),
    one of our server messages into the dialect's bodies (to_client), an error into its error body (error); `format`
    is None until a message sets it."""

    def __init__(self, ws: WebSocket, dialect, metrics):
        self.ws, self.dialect, self.metrics = ws, dialect, metrics
        self.inbox: deque[p.ClientMessage] = deque()
        self.lock = asyncio.Lock()

    async def first_format(self) -> p.StreamFormat | None:
        """Reads until the dialect knows the socket's audio format; None if the client left first."""
        while self.dialect.format is None:
            frame = await self.receive_dialect()
            if frame is None:
                return None
        return self.dialect.format

    async def receive_dialect(self) -> dict | None:
        """One client frame into the inbox; None when the client left."""
        frame = await self.ws.receive()
        if frame["type"] == "websocket.disconnect":
            self.inbox.append(frame)
            return None
        try:
            self.inbox.extend(self.dialect.from_client(frame.get("text")))
        except DialectError as exc:
            self.metrics.errors[exc.code] += 1
            with suppress(Exception):            # the client left: the next receive says so
                await self.send_bodies([self.dialect.error(exc.code, str(exc), exc.context_id)])
        return frame

    async def receive(self) -> dict:
        while not self.inbox:
            await self.receive_dialect()
        msg = self.inbox.popleft()
        return msg if isinstance(msg, dict) else {"type": "websocket.receive", "text": p.encode(msg)}

    async def send_text(self, frame: str) -> None:
        await self.send_bodies(self.dialect.to_client(p.parse_server(frame)))

    async def send_bytes(self, frame: bytes) -> None:
        await self.send_bodies(self.dialect.to_client(await self.dialect.encoded(p.unpack_audio(frame))))

    async def send_bodies(self, bodies: list[dict]) -> None:
        async with self.lock:
            for body in bodies:
                await self.ws.send_text(json.dumps(body, separators=(",", ":")))
            if self.dialect.closing:
                await self.ws.close(self.dialect.closing)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        async with self.lock:
            await self.ws.close(code, reason)


async def serve_dialect(ws: WebSocket, dialect) -> None:
    """Admission as our own socket's, refused at the handshake as the vendors do; then one Session over the dialect."""
    from ..server import admission_error, run_session     # server imports this module for its routes

    gateway = ws.app.state.gateway
    error = admission_error(gateway, dialect.auth_headers(ws), {}) or dialect.check_socket(gateway)
    if error is not None:
        gateway.metrics.errors[error.code] += 1
        body = dialect.error(error.code, error.message, None)
        return await ws.send_denial_response(JSONResponse(body, STATUS.get(error.code, 400)))
    await ws.accept(headers=[(b"x-served-model", gateway.engine.info["model"].encode())])   # whatever model_id asked
    socket = DialectSocket(ws, dialect, gateway.metrics)
    fmt = await socket.first_format()
    if fmt is None:
        return
    try:
        await run_session(gateway, socket, fmt)
    finally:
        with suppress(Exception):
            await ws.close(1000)                 # after close_socket; a socket already closed stays so
