"""Time to first audio as a WebSocket client on loopback sees it: the real gateway (Starlette + uvicorn) in
this process on the dummy engine, N concurrent sockets each streaming one utterance.

python bench/ws_bench.py --dummy 1.7B-CustomVoice --concurrency 1 16 --frames 50"""
import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "integrations")]      # this checkout's gateway and client

import websockets  # noqa: E402

from bench.workload import workload  # noqa: E402
from engine import Engine  # noqa: E402
from gateway.app_state import GatewayConfig  # noqa: E402
from tests.server_thread import ServerThread  # noqa: E402
from qwen_tts_client import protocol  # noqa: E402


async def one_stream(url: str, text: str) -> tuple[float, int]:
    async with websockets.connect(url, max_size=None) as ws:
        await ws.recv()                                            # ready
        t0 = time.perf_counter()
        await ws.send(json.dumps({"type": "text", "context_id": "c", "text": text}))
        await ws.send(json.dumps({"type": "end", "context_id": "c"}))
        first, samples = None, 0
        while True:
            msg = protocol.parse_server(await ws.recv())
            if isinstance(msg, protocol.Audio):
                first = first or time.perf_counter()
                samples += len(msg.data) // 2
            elif isinstance(msg, (protocol.Done, protocol.Error, protocol.Cancelled)):
                return (first - t0) if first else float("nan"), samples


async def level(url: str, n: int) -> list[float]:
    items = workload(n, seed=n, min_chars=40, max_chars=120)
    results = await asyncio.gather(*(one_stream(url, text) for text, _ in items))
    return [r[0] * 1000 for r in results]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dummy", default="1.7B-CustomVoice")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    p.add_argument("--frames", type=int, default=50)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    engine = Engine.load(dummy=args.dummy, max_active=max(args.concurrency)).start()
    server = ServerThread(engine, GatewayConfig(max_frames=args.frames)).start()
    for c in args.concurrency:
        ttfa = []
        for _ in range(args.repeats):
            ttfa += asyncio.run(level(server.ws_url, c))
        print(f"ws c={c}: ttfa p50 {np.percentile(ttfa, 50):.1f} ms p90 {np.percentile(ttfa, 90):.1f} ms "
              f"({len(ttfa)} streams)", flush=True)
    server.stop()
    engine.shutdown()


if __name__ == "__main__":
    main()
