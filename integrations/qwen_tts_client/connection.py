"""How the integrations reach the gateway: URL and key, handshake, speech options, errors. Framework-free."""
import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import fields
from urllib.parse import urlencode, urlsplit

import websockets

from . import protocol as p

log = logging.getLogger("qwen_tts_client")
WEBSOCKET_PATH = "/v1/tts/websocket"
CONNECTION_FAILED, CONNECTION_LOST, TIMEOUT = "connection_failed", "connection_lost", "timeout"   # client-side codes
SPEECH_OPTIONS = frozenset(f.name for f in fields(p.Text)) - {"context_id", "text", "end"}


class GatewayError(Exception):
    """An error the gateway sent (its code and retryable flag), or a client-side connection failure or timeout."""

    def __init__(self, code: str, message: str, retryable: bool):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.retryable = code, message, retryable


def gateway_language(language: str | None) -> str | None:
    """ISO codes ('en', 'en-US') to the gateway's language names; names ('english', 'auto') pass through."""
    return language and p.LANGUAGE_CODES.get(language.split("-")[0].lower(), language.lower())


def speech_options(**options) -> dict:
    options = {k: v for k, v in options.items() if v is not None}
    try:
        p.parse_client(p.encode(p.Text("check", "", **options)))
    except p.ProtocolError as exc:
        raise ValueError(exc.message) from None
    return options


class Endpoint:
    def __init__(self, base_url: str, api_key: str | None = None, sample_rate: int = p.DEFAULT_SAMPLE_RATE):
        url = base_url.rstrip("/").replace("http", "ws", 1) if base_url.startswith("http") else base_url.rstrip("/")
        if urlsplit(url).scheme not in ("ws", "wss"):
            raise ValueError(f"base_url must be ws://, wss://, http:// or https://, not {base_url!r}")
        try:
            fmt = p.StreamFormat.from_query({"sample_rate": str(sample_rate)})               # 16-bit PCM
        except p.ProtocolError as exc:
            raise ValueError(exc.message) from None
        self.url = f"{url if url.endswith(WEBSOCKET_PATH) else url + WEBSOCKET_PATH}?{urlencode(fmt.to_query())}"
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}


async def handshake(ws, timeout: float) -> p.Ready:
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


async def open_socket(endpoint: Endpoint, timeout: float, connect=websockets.connect):
    try:
        ws = await connect(endpoint.url, additional_headers=endpoint.headers, open_timeout=timeout)
    except TimeoutError:
        raise GatewayError(TIMEOUT, f"connecting to {endpoint.url} timed out after {timeout:g} s", True) from None
    except (OSError, websockets.InvalidHandshake) as exc:
        raise GatewayError(CONNECTION_FAILED, f"cannot connect to {endpoint.url}: {exc}", True) from None
    try:
        return ws, await handshake(ws, timeout)
    except GatewayError:
        await ws.close()
        raise


async def server_messages(ws) -> AsyncIterator[p.ServerMessage]:
    async for frame in ws:
        try:
            yield p.parse_server(frame)
        except (KeyError, TypeError, ValueError) as exc:       # a newer server's message, or a malformed one
            log.warning("skipping a gateway message: %r", exc)
