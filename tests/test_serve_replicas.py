"""`serve --replicas 2` under a local Ray: one endpoint, sockets spread over both replicas (both `replica` labels of
/metrics count requests), a voice registered through one replica spoken by streams of both, a replica's unit killed
(its open sockets end with `internal` and a close, the others and new ones go on, Ray replaces it), and the voice
still there after a full restart."""
import asyncio
import base64
import json
import os
import re
import signal
import time
import urllib.request

import numpy as np
import psutil
import pytest
import websockets

from bench.load_server import ServeProcess
from engine.api.wav import write_wav
from qwen_tts_client import protocol as p

pytestmark = pytest.mark.slow                # Ray Serve

pytest.importorskip("ray.serve")
SOCKETS = 16


def serve(tmp_path, replicas: int, log: str) -> ServeProcess:
    server = ServeProcess(f"--replicas {replicas} --dummy tiny-0.6B-Base --device cpu --max-frames 8 --workers 1 "
                          f"--voices-dir {tmp_path / 'voices'} --log-level warning", tmp_path / log)
    wait_for(server, lambda h: h["replicas_ready"] == replicas, 240)
    return server


def health(server: ServeProcess) -> dict:
    try:
        with urllib.request.urlopen(f"{server.url}/health", timeout=5) as response:
            return json.loads(response.read())
    except OSError as exc:                   # 503 while loading carries the same body
        return json.loads(exc.read()) if hasattr(exc, "read") else {"replicas_ready": -1}


def wait_for(server: ServeProcess, condition, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while not condition(state := health(server)):
        assert server.proc.poll() is None and time.monotonic() < deadline, (state, server.log.name)
        time.sleep(0.5)
    return state


def register(server: ServeProcess, tmp_path) -> None:
    t = np.arange(24000) / 24000
    write_wav(tmp_path / "ref.wav", (0.3 * np.sin(2 * np.pi * 180 * t)).astype(np.float32))
    body = json.dumps({"name": "ann", "audio": base64.b64encode((tmp_path / "ref.wav").read_bytes()).decode(),
                       "text": "A short reference."}).encode()
    request = urllib.request.Request(f"{server.url}/v1/voices", body, {"Content-Type": "application/json"})
    assert urllib.request.urlopen(request, timeout=60).status == 201


async def speak(ws, k: int) -> p.ServerMessage:
    await ws.send(p.encode(p.Text("c", f"Socket {k} says hello.", voice="ann", seed=k)))
    await ws.send(p.encode(p.End("c")))
    while not p.ends_context(msg := p.parse_server(await asyncio.wait_for(ws.recv(), 60))):
        pass
    return msg


async def open_sockets(server: ServeProcess, n: int) -> list:
    sockets = [await websockets.connect(f"ws://127.0.0.1:{server.port}/v1/tts/websocket") for _ in range(n)]
    for ws in sockets:
        assert isinstance(p.parse_server(await ws.recv()), p.Ready)
    return sockets


async def conversations(server: ServeProcess, n: int) -> list:
    sockets = await open_sockets(server, n)
    last = await asyncio.gather(*(speak(ws, k) for k, ws in enumerate(sockets)))
    await asyncio.gather(*(ws.close() for ws in sockets))
    return last


async def fate(ws) -> tuple:
    """(error code, close code) if the socket ends within a few seconds, else None (it is alive)."""
    try:
        msg = p.parse_server(await asyncio.wait_for(ws.recv(), 8))
        await asyncio.wait_for(ws.recv(), 8)
    except asyncio.TimeoutError:
        return None
    except websockets.ConnectionClosed as closed:
        return msg.code, closed.rcvd.code
    return msg, "more"


def requests_by_replica(server: ServeProcess) -> dict[str, int]:
    text = urllib.request.urlopen(f"{server.url}/metrics", timeout=10).read().decode()
    return {r: int(n) for r, n in re.findall(r'tts_requests_total\{replica="(\w+)",api="websocket"\} (\d+)', text)}


def test_replicas_behind_one_endpoint(tmp_path):
    server = serve(tmp_path, 2, "serve.log")
    try:
        register(server, tmp_path)                                   # through one replica, spoken by both
        assert all(isinstance(m, p.Done) for m in asyncio.run(conversations(server, SOCKETS)))
        time.sleep(1.5)                                              # each front end reports its counters each second
        counts = requests_by_replica(server)
        assert len(counts) == 2 and sum(counts.values()) == SOCKETS and min(counts.values()) > 0, counts

        async def kill_one():
            sockets = await open_sockets(server, 4)
            victim = health(server)["replica_load"]["0"]
            assert victim["connections"] == 2
            os.kill(victim["pid"], signal.SIGKILL)
            fates = await asyncio.gather(*(fate(ws) for ws in sockets))
            alive = [ws for ws, f in zip(sockets, fates) if f is None]
            survivors = await asyncio.gather(*(speak(ws, k) for k, ws in enumerate(alive)))
            return fates, survivors, await conversations(server, 4)
        fates, survivors, after = asyncio.run(kill_one())
        assert sorted(fates, key=str) == [("internal", 1011)] * 2 + [None] * 2, fates
        assert all(isinstance(m, p.Done) for m in survivors + after)
        wait_for(server, lambda h: h["replicas_ready"] == 2, 120)   # Ray Serve replaced it
    finally:
        assert server.stop() == 0
    assert not [proc for proc in psutil.process_iter(["cmdline"]) if str(tmp_path) in " ".join(proc.info["cmdline"] or [])]

    server = serve(tmp_path, 1, "restart.log")                       # the registry outlives the servers
    try:
        voices = json.loads(urllib.request.urlopen(f"{server.url}/v1/voices", timeout=10).read())["voices"]
        assert {"name": "ann", "type": "clone"} in voices
        assert all(isinstance(m, p.Done) for m in asyncio.run(conversations(server, 2)))
    finally:
        server.stop()
