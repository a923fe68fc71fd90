"""Many concurrent sockets on the tiny dummy engine: nothing lost, every context ends, sample counts exact."""
import asyncio
import time

import numpy as np
import pytest
import websockets

from engine import Engine
from gateway.app_state import GatewayConfig
from server_thread import ServerThread
from qwen_tts_client import protocol as p

SOCKETS, FRAMES = 50, 8


@pytest.fixture(scope="module")
def server():
    engine = Engine.load(dummy="tiny", device="cpu", max_active=64).start()
    srv = ServerThread(engine, GatewayConfig(max_frames=FRAMES)).start()
    yield srv
    srv.stop()


async def client(srv, k: int) -> tuple[list, int]:
    rate = (24000, 16000, 8000)[k % 3]
    cancel = k % 5 == 4
    async with websockets.connect(f"{srv.ws_url}?sample_rate={rate}") as ws:
        assert isinstance(p.parse_server(await ws.recv()), p.Ready)
        for i, piece in enumerate(["Socket number ", str(k), " says hello."]):
            await ws.send(p.encode(p.Text("ctx", piece, seed=k) if i == 0 else p.Text("ctx", piece)))
        if not cancel:
            await ws.send(p.encode(p.End("ctx")))
        messages = []
        while not messages or not isinstance(messages[-1], (p.Done, p.Cancelled, p.Error)):
            messages.append(p.parse_server(await asyncio.wait_for(ws.recv(), 60)))
            if cancel and len(messages) == 1:
                await ws.send(p.encode(p.Cancel("ctx")))
        return messages, rate


@pytest.mark.slow                                   # fifty sockets
def test_fifty_concurrent_sockets_lose_nothing(server):
    async def run():
        return await asyncio.gather(*[client(server, k) for k in range(SOCKETS)])

    t0 = time.monotonic()
    results = asyncio.run(run())
    elapsed = time.monotonic() - t0
    for k, (messages, rate) in enumerate(results):
        audio = [m for m in messages if isinstance(m, p.Audio)]
        samples = [len(m.data) // 2 for m in audio]
        assert [m.seq for m in audio] == list(range(len(audio)))
        assert [m.sample_offset for m in audio] == np.cumsum([0] + samples)[:-1].tolist()
        last = messages[-1]
        if k % 5 == 4:
            assert isinstance(last, p.Cancelled), last
            assert last.played_ms == sum(samples) * 1000 / rate <= last.generated_ms
        else:
            assert isinstance(last, p.Done), last
            assert sum(samples) == FRAMES * 1920 * rate // 24000 and last.audio_ms == FRAMES * 80
    gw = server.gateway
    deadline = time.monotonic() + 5
    while (server.engine.num_active or gw.open_contexts or gw.sessions) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (server.engine.num_active, gw.open_contexts, len(gw.sessions)) == (0, 0, 0)
    assert not gw.metrics.errors
    print(f"{SOCKETS} sockets x {FRAMES} frames in {elapsed:.1f}s")
