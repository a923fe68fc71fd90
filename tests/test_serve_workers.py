"""`serve --workers 2`: two front-end processes on one port and one engine core; the kernel spreads the sockets over
them, every context ends with `done`, /metrics counts every front end's requests whichever answers, (as of each one's last report, at most a second old), and one
SIGINT stops them all."""
import asyncio
import re
import time
import urllib.request

import psutil
import pytest
import websockets

from bench.load_server import ServeProcess
from qwen_tts_client import protocol as p

pytestmark = pytest.mark.slow                # `serve` processes

SOCKETS = 16


async def converse(url: str, k: int, opened: asyncio.Event, go: asyncio.Event) -> p.ServerMessage:
    async with websockets.connect(url) as ws:
        assert isinstance(p.parse_server(await ws.recv()), p.Ready)
        opened.set()
        await go.wait()
        await ws.send(p.encode(p.Text("c", f"Socket {k} says hello.", seed=k)))
        await ws.send(p.encode(p.End("c")))
        while not p.ends_context(msg := p.parse_server(await asyncio.wait_for(ws.recv(), 60))):
            pass
        return msg


def test_two_front_ends_share_the_port_and_the_engine_core(tmp_path):
    serve = ServeProcess("--dummy tiny --device cpu --max-frames 8 --workers 2", tmp_path / "serve.log")
    try:
        serve.wait_ready(120)
        main = psutil.Process(serve.proc.pid)

        async def run():
            opened, go = [asyncio.Event() for _ in range(SOCKETS)], asyncio.Event()
            url = f"ws://127.0.0.1:{serve.port}/v1/tts/websocket"
            tasks = [asyncio.create_task(converse(url, k, opened[k], go)) for k in range(SOCKETS)]
            await asyncio.gather(*(e.wait() for e in opened))
            holders = [proc for proc in [main, *main.children()] if any(
                c.status == psutil.CONN_ESTABLISHED and c.laddr.port == serve.port for c in proc.net_connections())]
            go.set()
            return holders, await asyncio.gather(*tasks)
        holders, last = asyncio.run(run())
        assert len(holders) == 2                              # both front ends hold sockets
        assert all(isinstance(m, p.Done) for m in last), last
        time.sleep(1.5)                                       # the front ends report their counters each second
        for _ in range(4):                                    # whichever front end answers the scrape
            text = urllib.request.urlopen(f"{serve.url}/metrics", timeout=5).read().decode()
            assert re.search(r'tts_requests_total\{api="websocket"\} (\d+)', text).group(1) == str(SOCKETS)
        family = [main, *main.children(recursive=True)]
    finally:
        serve.stop()
    gone, alive = psutil.wait_procs(family, timeout=30)
    assert not alive
