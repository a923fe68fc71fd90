"""What the integration tests share: a gateway on loopback (tiny dummy engine) that can come back on its port."""
import asyncio
import functools
import socket
import threading
import time

import websockets

from engine import Engine
from gateway import protocol as p
from gateway.service import GatewayConfig
from gateway.testing import ServerThread

KEY = "integration-key"


def tiny_engine() -> Engine:
    return Engine.load(dummy="tiny", device="cpu", max_seqs=4).start()


def serve(port: int = 0, engine: Engine | None = None, **config) -> ServerThread:
    srv = ServerThread(engine or tiny_engine(), GatewayConfig(api_keys=(KEY,), max_active=4, **config))
    if port:                                    # a restart on the same port (ServerThread binds a free one)
        srv.sock.close()
        srv.sock, srv.port = socket.create_server(("127.0.0.1", port)), port
        srv.thread = threading.Thread(target=srv.server.run, kwargs={"sockets": [srv.sock]}, daemon=True)
    return srv.start()


async def wait_until(condition, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


@functools.cache
def gateway_sends_words(srv: ServerThread) -> bool:
    """Whether the gateway sends `words` events (once the aligner is integrated), asked over the raw protocol."""
    async def run():
        async with websockets.connect(srv.ws_url, additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
            await ws.recv()
            await ws.send(p.encode(p.Text("w", "Hello there.")))
            await ws.send(p.encode(p.End("w")))
            messages = [p.parse_server(await ws.recv())]
            while not isinstance(messages[-1], (p.Done, p.Error)):
                messages.append(p.parse_server(await ws.recv()))
            return any(isinstance(m, p.Words) for m in messages)

    return asyncio.run(run())
