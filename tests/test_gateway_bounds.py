"""Every resource a client can make the server hold is bounded (issue 19, D, E, H): pending text, HTTP bodies, the
outbound buffer of a client that stops reading, engine slots held by idle contexts."""
import asyncio
import contextlib
import json
import socket
import time

import numpy as np
import pytest
import websockets

from engine import Engine
from gateway.limits import Limits
from gateway.app_state import GatewayConfig
from fake_clock import FakeClock
from server_thread import ServerThread
from integration_helpers import wait_until
from qwen_tts_client import protocol as p
from ws_helpers import collect, recv, send, wait_idle

FRAMES = 12


@pytest.fixture(scope="module")
def server():
    srv = ServerThread(Engine.load(dummy="tiny", device="cpu", max_active=4).start(),
                       GatewayConfig(max_frames=FRAMES)).start()
    yield srv
    srv.stop()


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2 ** 20


@pytest.mark.slow
def test_a_text_flood_is_refused_before_memory_grows(server):
    piece, floods = "flood " * 816 + "up", 20000              # 4,898 characters, as the issue sent
    before = rss_mb()

    async def read_errors(ws) -> list:
        codes = []
        while not codes or codes[-1] != (p.UNKNOWN_CONTEXT, "probe"):
            msg = await recv(ws)
            if isinstance(msg, p.Error):
                codes.append((msg.code, msg.context_id))
        return codes

    async def run():
        async with websockets.connect(server.ws_url) as ws:
            await recv(ws)
            reader = asyncio.create_task(read_errors(ws))
            for _ in range(floods):
                await send(ws, p.Text("f", piece), p.Flush("f"))
            await send(ws, p.Flush("probe"))
            return await reader, rss_mb()

    codes, during = asyncio.run(run())
    assert codes[0] == (p.TOO_MUCH_PENDING_TEXT, "f")             # the fifth utterance: 20,000 characters
    assert {c for c, _ in codes[1:-1]} == {p.DUPLICATE_CONTEXT, p.CONTEXT_ENDED}
    wait_idle(server)
    assert during - before < 30, (before, during)                  # 98 MB of text went by


def test_pending_text_is_bounded_per_socket(server, monkeypatch):
    monkeypatch.setattr(server.gateway.config, "limits", Limits(max_pending_chars=1000,
                                                                max_pending_chars_per_socket=2500))

    async def run():
        async with websockets.connect(server.ws_url) as ws:
            await recv(ws)
            await send(ws, *[p.Text(cid, "word " * 180) for cid in "abc"])    # 901 each: c crosses 2,500
            error = (await collect(ws, ["c"]))["c"][-1]
            await send(ws, p.Text("a", "more " * 10), p.Text("b", "much more " * 20))   # b crosses 1,000
            b_error = (await collect(ws, ["b"]))["b"][-1]
            await send(ws, p.Cancel("*"))
            return error, b_error, (await collect(ws, ["a"]))["a"][-1]

    error, b_error, a_last = asyncio.run(run())
    assert (error.code, error.retryable) == (p.TOO_MUCH_PENDING_TEXT, False) and "2500 per socket" in error.message
    assert b_error.code == p.TOO_MUCH_PENDING_TEXT and isinstance(a_last, p.Cancelled)
    wait_idle(server)


def http_status(port: int, head: str, parts=()) -> tuple[int, dict]:
    """A raw request: its head, then body parts until the server answers; the status and the JSON body."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode())
        for part in parts:
            sock.sendall(part)
        response = b""
        while b"\r\n\r\n" not in response or len(response) < response.index(b"\r\n\r\n") + 4 + int(
                response.split(b"content-length: ")[1].split(b"\r\n")[0]):
            response += sock.recv(65536)
    head, body = response.split(b"\r\n\r\n", 1)
    return int(head.split()[1]), json.loads(body)


@pytest.mark.parametrize("path, length", [("/v1/audio/speech", 100 << 20), ("/v1/voices", 17 << 20)])
def test_a_large_body_is_refused_before_it_is_read(server, path, length):
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    status, body = http_status(server.port, head, [b'{"input": "'])         # the rest is never sent
    assert (status, body["error"]["code"]) == (413, p.MESSAGE_TOO_LARGE)


def test_a_large_streamed_body_is_refused_once_the_bound_is_crossed(server):
    head = "POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunk = b"4000\r\n" + b" " * 0x4000 + b"\r\n"
    status, body = http_status(server.port, head, [chunk] * 5)              # 80 KiB, above 64 KiB
    assert (status, body["error"]["code"]) == (413, p.MESSAGE_TOO_LARGE)


@pytest.mark.slow                                   # fills the socket buffers
def test_a_client_that_stops_reading_loses_its_contexts_then_its_socket():
    srv = ServerThread(Engine.load(dummy="tiny", device="cpu", max_active=2).start(),
                       GatewayConfig(max_frames=400, limits=Limits(max_outbound_seconds=1.0)))
    srv.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)      # a slow network: little in flight
    srv.start()
    gw = srv.gateway

    async def run():
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", srv.port))
        async with websockets.connect(srv.ws_url, sock=sock, max_queue=1) as ws:
            text = "A long answer that goes on and on, so that there is plenty of audio to send. " * 4
            await send(ws, p.Text("a", text, seed=1), p.End("a"), p.Text("b", text, seed=2), p.End("b"))
            await wait_until(lambda: srv.engine.num_active == 2, 10)
            t0 = time.monotonic()                                       # reads nothing from here on
            await wait_until(lambda: not (srv.engine.num_active or gw.open_contexts), 20)
            freed = time.monotonic() - t0
            messages = []
            with contextlib.suppress(websockets.ConnectionClosedError):
                while True:
                    messages.append(p.parse_server(await ws.recv()))
            return freed, messages, ws.close_code

    try:
        freed, messages, close_code = asyncio.run(run())
        errors = {m.context_id: m.code for m in messages if isinstance(m, p.Error)}
        assert errors and set(errors.values()) == {p.SLOW_CONSUMER} and close_code == p.CLOSE_POLICY
        assert freed < 10                   # (a context that had ended: its last message went with the backlog)
        wait_idle(srv)
    finally:
        srv.stop()


@pytest.mark.slow
def test_keepalives_keep_contexts_not_engine_slots():
    clock = FakeClock()
    srv = ServerThread(Engine.load(dummy="tiny", device="cpu", max_active=32).start(),
                       GatewayConfig(max_frames=20, context_timeout=3600,
                                     limits=Limits(idle_release=0.5, max_outbound_seconds=3600)), clock=clock).start()

    async def run():
        async with websockets.connect(srv.ws_url) as a, websockets.connect(srv.ws_url) as b, \
                websockets.connect(srv.ws_url) as c:
            await recv(a), await recv(b), await recv(c)
            ids = {a: [f"a{k}" for k in range(16)], b: [f"b{k}" for k in range(16)]}
            for ws, cids in ids.items():
                await send(ws, *[p.Text(cid, "Well,", seed=k) for k, cid in enumerate(cids)])
            await wait_until(lambda: srv.engine.num_active == 32, 20)
            await send(c, p.Text("late", "Can I speak?"))
            busy = await recv(c)
            async with asyncio.timeout(30):
                while srv.engine.num_active:                              # idle: only keepalives come
                    await send(a, p.Keepalive()), await send(b, p.Keepalive())
                    await clock.checked(1.0, sleepers=3)
                    await asyncio.sleep(0.05)
            await send(c, p.Text("later", "Now I can.", seed=1), p.End("later"))
            late = (await collect(c, ["later"]))["later"]
            for ws, cids in ids.items():
                await send(ws, *[m for cid in cids for m in (p.Text(cid, " let me think."), p.End(cid))])
            return busy, late, {**(await collect(a, ids[a])), **(await collect(b, ids[b]))}

    try:
        busy, late, contexts = asyncio.run(run())
        assert (busy.code, busy.context_id) == (p.BUSY, "late") and isinstance(late[-1], p.Done)
        for messages in contexts.values():
            assert isinstance(messages[-1], p.Done) and not any(isinstance(m, p.Flushed) for m in messages)
            audio = [m for m in messages if isinstance(m, p.Audio)]
            assert [m.seq for m in audio] == list(range(len(audio)))   # one stream across the two requests
            offsets = np.cumsum([0] + [len(m.data) // 2 for m in audio])
            assert [m.sample_offset for m in audio] == offsets[:-1].tolist()
            assert messages[-1].audio_ms == offsets[-1] / 24
        wait_idle(srv)
    finally:
        srv.stop()
