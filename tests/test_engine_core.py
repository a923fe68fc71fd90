"""The engine core in its own process, as `serve` runs it: requests, voices and stats cross the socket, and when the
process dies its contexts end with `internal`, /health answers 503, no socket hangs, and the server stops."""
import asyncio
import os
import signal

import httpx
import pytest
import websockets

from gateway.engine_process import EngineSpec, starts
from gateway.app_state import GatewayConfig
from server_thread import ServerThread
from qwen_tts_client import protocol as p

pytestmark = pytest.mark.slow                # an engine-core process


@pytest.fixture()
def server():
    srv = ServerThread(config=GatewayConfig(max_frames=400),
                       client=starts.spawn(EngineSpec(dummy="tiny", device="cpu", max_active=4), "warning"))
    yield srv.start()
    srv.stop()


async def first_messages(ws, n: int) -> list:
    return [p.parse_server(await asyncio.wait_for(ws.recv(), 30)) for _ in range(n)]


def test_a_child_process_serves_and_its_death_ends_every_context_with_internal(server):
    core = server.gateway.engine.process
    assert core is not None and core.is_alive() and core.pid != os.getpid()

    async def run():
        async with websockets.connect(server.ws_url) as ws:
            assert isinstance(p.parse_server(await ws.recv()), p.Ready)
            await ws.send(p.encode(p.Text("a", "A long sentence that keeps the engine busy for a while.", seed=1)))
            await ws.send(p.encode(p.End("a")))
            assert isinstance((await first_messages(ws, 1))[0], p.Audio)
            os.kill(core.pid, signal.SIGKILL)
            messages = []
            try:
                while True:
                    messages.append(p.parse_server(await asyncio.wait_for(ws.recv(), 30)))
            except websockets.ConnectionClosed as closed:
                return messages, closed.rcvd.code if closed.rcvd else None
    messages, close_code = asyncio.run(run())
    errors = [m for m in messages if isinstance(m, p.Error)]
    assert [(e.code, e.context_id, e.retryable) for e in errors] == [(p.INTERNAL, "a", True), (p.INTERNAL, None, True)]
    assert close_code == p.CLOSE_INTERNAL                # as docs/protocol.md lists it
    assert server.gateway.status == "failed"
    server.thread.join(30)
    assert not server.thread.is_alive()                 # the server stopped: a supervisor restarts it
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/health")
