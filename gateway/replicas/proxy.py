"""The one endpoint in front of the replicas: picks a replica per connection and relays bytes both ways."""
import asyncio
import json
import logging
import re

from . import frames
from .balance import Replica, ReplicaTable
from .metrics import gauges, merge

log = logging.getLogger("qwen_tts_gateway")
HEAD_TIMEOUT_S, HEAD_LIMIT = 10.0, 65536
CLOSE_INTERNAL, CLOSE_TRY_LATER = 1011, 1013
CONNECTION = re.compile(rb"\r\nconnection:[^\r]*", re.IGNORECASE)
REASONS = {200: "OK", 502: "Bad Gateway", 503: "Service Unavailable"}


def response(status: int, body: str, media_type: str = "application/json") -> bytes:
    data, retry = body.encode(), "Retry-After: 1\r\n" if status == 503 else ""
    return (f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: {media_type}\r\nContent-Length: {len(data)}\r\n"
            f"Connection: close\r\n{retry}\r\n").encode() + data


def api_error(status: int, code: str, message: str) -> bytes:
    return response(status, json.dumps({"error": {"code": code, "message": message, "type": "invalid_request_error"}}))


async def fetch(url: str, path: str, timeout: float = 5.0) -> tuple[int, str]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), timeout)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(None, 2)[1]), body.decode()


class Proxy:
    def __init__(self, table: ReplicaTable):
        self.table = table

    async def poll(self, replica: Replica) -> None:
        try:
            values = gauges((await fetch(replica.url, "/metrics"))[1])
            if values.get("tts_ready") and replica.info is None:
                replica.info = json.loads((await fetch(replica.url, "/health"))[1])
            self.table.polled(replica, values if values.get("tts_ready") else None)
        except (OSError, ValueError, IndexError, asyncio.TimeoutError):
            self.table.polled(replica, None)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1].split("?")[0]
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            if path in ("/health", "/metrics"):
                writer.write(await (self.health() if path == "/health" else self.metrics()))
            else:
                await self.relay(head, headers, reader, writer)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, IndexError,
                ConnectionError):
            pass
        finally:
            writer.close()

    async def health(self) -> bytes:
        ready = self.table.ready()
        body = {**(ready[0].info if ready else {}), "status": "ready" if ready and self.table.started else "loading",
                "replicas": self.table.wanted, "replicas_ready": len(ready),
                "replica_load": {r.name: dict(streams=r.streams, connections=r.connections, step_ms=r.step_ms,
                                              pid=r.pid) for r in ready}}
        return response(200 if body["status"] == "ready" else 503, json.dumps(body))

    async def metrics(self) -> bytes:
        ready = self.table.ready()
        pages = await asyncio.gather(*(fetch(r.url, "/metrics") for r in ready), return_exceptions=True)
        text = merge({r.name: page[1] for r, page in zip(ready, pages) if not isinstance(page, BaseException)})
        own = f"# HELP tts_replicas_ready replicas serving\n# TYPE tts_replicas_ready gauge\ntts_replicas_ready {len(ready)}\n"
        return response(200, own + text, "text/plain; version=0.0.4")

    async def relay(self, head: bytes, headers: dict, reader, writer) -> None:
        websocket = headers.get("upgrade", "").lower() == "websocket"
        replica = self.table.choose()
        if replica is None:
            return await self.refuse(writer, headers, websocket, "busy")
        replica.connections += 1                # at once: the sockets that come meanwhile see it
        try:
            await self.forward(replica, head, websocket, reader, writer)
        except OSError:
            await self.refuse(writer, headers, websocket, "internal")
        finally:
            replica.connections -= 1

    async def forward(self, replica: Replica, head: bytes, websocket: bool, reader, writer) -> None:
        up_reader, up_writer = await asyncio.open_connection(*replica.address)
        up_writer.write(head if websocket else CONNECTION.sub(b"", head[:-2]) + b"Connection: close\r\n\r\n")
        tracker = frames.ServerFrames() if websocket else None

        async def upward():                 # the client's bytes; its end ends the replica's side too
            await self.pump(reader, up_writer)
            up_writer.close()
        client = asyncio.create_task(upward())
        try:
            sent = await self.pump(up_reader, writer, tracker)
            if client.done():
                return
            if tracker is not None and not tracker.closed and tracker.at_boundary:      # the replica died under it
                writer.write(frames.error_and_close("internal", f"replica {replica.name} serving this socket failed: "
                                                    "its contexts are lost; reconnect", CLOSE_INTERNAL))
            elif tracker is None and not sent:
                writer.write(api_error(502, "internal", f"replica {replica.name} failed; retry"))
            await writer.drain()
        finally:
            client.cancel()
            up_writer.close()

    @staticmethod
    async def pump(reader, writer, tracker: frames.ServerFrames | None = None) -> int:
        sent = 0
        try:
            while data := await reader.read(65536):
                if tracker is not None:
                    tracker.feed(data)
                writer.write(data)
                sent += len(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        return sent

    async def refuse(self, writer, headers: dict, websocket: bool, code: str) -> None:
        message = "every replica is at capacity; retry shortly" if code == "busy" else "the replica is gone; retry"
        if websocket and "sec-websocket-key" in headers:
            writer.write(frames.accept(headers["sec-websocket-key"]) + frames.error_and_close(code, message, CLOSE_TRY_LATER))
        else:
            writer.write(api_error(503, code, message))
        await writer.drain()
