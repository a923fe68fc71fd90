"""Voice registrations beside live streams, through the real `serve` (issue 33): a victim stream's largest gap between
audio chunks alone and while registrations of every allowed extreme run, in turns, at several background loads.

python3 bench/voice_gap_bench.py --serve "--dummy 1.7B-Base --max-frames 150 --max-active 64" --background 0 32 60

Per level: --rounds rounds, each a victim alone then a victim beside registrations (one running, one waiting, all
along). Prints one line a level; --out DIR gets voice_gap_bench.json (every gap, every registration's latency)."""
import argparse
import asyncio
import base64
import io
import json
import multiprocessing
import sys
import time
import wave
from pathlib import Path

import httpx
import numpy as np
import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "integrations")]

from bench.load_server import ServeProcess, device_name  # noqa: E402
from engine.api import voice_input as limits  # noqa: E402
from qwen_tts_client import protocol as p  # noqa: E402

TEXT = ("The victim keeps on speaking, minding its own business, sentence after sentence, while other clients "
        "register voices beside it. ") * 4


def noise_wav(rate: int, seconds: float, channels: int = 1, width: int = 2) -> bytes:
    frames = int(rate * seconds)
    noise = np.random.default_rng(rate).integers(0, 255, frames * channels * width, dtype=np.uint8).tobytes()
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels), w.setsampwidth(width), w.setframerate(rate)
        w.writeframes(noise)
    return buf.getvalue()


def extremes() -> dict[str, tuple[bytes, str | None]]:
    """Every extreme a registration may take: its WAV of noise and its transcript (None: an x-vector-only voice)."""
    longest, transcript = limits.MAX_REFERENCE_S, "a" * limits.MAX_TRANSCRIPT_CHARS
    return {"48k_stereo_60s_icl": (noise_wav(48000, longest, channels=2), transcript),
            "11k_60s_icl": (noise_wav(11025, longest), transcript),            # the largest resampling ratio
            "8k_1s_xvec": (noise_wav(8000, limits.MIN_REFERENCE_S, width=1), None),
            "44k_32bit_60s_xvec": (noise_wav(44100, longest, width=4), None)}


def registration_bodies() -> dict[str, dict]:
    return {name: {"audio": base64.b64encode(wav).decode(), **({"text": text} if text else {"x_vector_only": True})}
            for name, (wav, text) in extremes().items()}


async def speak(ws_url: str, context: str, voice: str) -> list[float]:
    """One context's audio arrival times."""
    async with websockets.connect(ws_url, max_size=None) as ws:
        await ws.recv()
        await ws.send(p.encode(p.Text(context, TEXT, voice=voice, seed=1)))
        await ws.send(p.encode(p.End(context)))
        arrivals = []
        while True:
            frame = await ws.recv()
            if isinstance(frame, bytes):
                arrivals.append(time.perf_counter())
            elif p.ends_context(p.parse_server(frame)):
                return arrivals


async def background(ws_url: str, n: int, stop: asyncio.Event) -> None:
    async def loop(k: int):
        while not stop.is_set():
            await speak(ws_url, f"bg{k}", "victim")
    await asyncio.gather(*(loop(k) for k in range(n)))


async def register_all_along(url: str, bodies: dict, stop, latencies) -> None:
    """Two at a time (one computing, one waiting), cycling through the extremes."""
    payloads = {kind: [json.dumps({"name": f"bench{k}", **body}).encode() for k in range(3)]
                for kind, body in bodies.items()}

    async def one(k: int):
        while not stop.is_set():
            kind = list(payloads)[k % len(payloads)]
            t0 = time.perf_counter()
            response = await http.post("/v1/voices", content=payloads[kind][k % 3],
                                       headers={"content-type": "application/json"})
            latencies.put((kind, response.status_code, round(time.perf_counter() - t0, 3)))
            k += 2
    async with httpx.AsyncClient(base_url=url, timeout=600) as http:
        await asyncio.gather(one(0), one(1))


def registrar(url: str, bodies: dict, stop, latencies) -> None:
    """A process of its own: a 16 MiB body's encoding and sending never delay the victim's arrival times."""
    asyncio.run(register_all_along(url, bodies, stop, latencies))


def max_gap(arrivals: list[float]) -> float:
    return round(float(np.diff(arrivals).max()), 4)


async def level(url: str, n: int, rounds: int, bodies: dict) -> dict:
    ws_url = url.replace("http", "ws", 1) + "/v1/tts/websocket"
    stop_bg = asyncio.Event()
    load = asyncio.create_task(background(ws_url, n, stop_bg))
    alone, beside, latencies = [], [], {}
    spawn = multiprocessing.get_context("spawn")
    await speak(ws_url, "warm", "victim")
    for _ in range(rounds):
        alone.append(max_gap(await speak(ws_url, "victim", "victim")))
        stop, done = spawn.Event(), spawn.Queue()
        registering = spawn.Process(target=registrar, args=(url, bodies, stop, done))
        registering.start()
        await asyncio.sleep(2.0)        # the process started and its first registrations are running
        beside.append(max_gap(await speak(ws_url, "victim", "victim")))
        stop.set()
        await asyncio.to_thread(registering.join)
        while not done.empty():
            kind, status, seconds = done.get()
            latencies.setdefault(kind, []).append((status, seconds))
    stop_bg.set()
    await load
    return dict(background=n, alone_max_gap_s=alone, beside_max_gap_s=beside,
                ratio=round(float(np.median(beside)) / max(alone), 3), registrations=latencies)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = ap.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="a running Base-model server, http://host:port")
    target.add_argument("--serve", metavar="ARGS", help="start `serve ARGS` itself")
    ap.add_argument("--background", type=int, nargs="+", default=[0, 32, 60],
                    help="other streams at once, a level each")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    out = args.out or Path(".")
    out.mkdir(parents=True, exist_ok=True)
    server = ServeProcess(args.serve, out / "serve.log") if args.serve else None
    url = server.url if server else args.url
    try:
        if server:
            server.wait_ready(1200)
        bodies = registration_bodies()
        httpx.post(url + "/v1/voices", json={"name": "victim", **bodies["8k_1s_xvec"]}, timeout=600).raise_for_status()
        results = []
        for n in args.background:
            results.append(asyncio.run(level(url, n, args.rounds, bodies)))
            r = results[-1]
            print(f"{n:4d} streams beside: victim's largest gap alone {r['alone_max_gap_s']} s, beside registrations "
                  f"{r['beside_max_gap_s']} s (median / worst alone {r['ratio']})", flush=True)
        (out / "voice_gap_bench.json").write_text(json.dumps(dict(device=device_name(), levels=results), indent=1))
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    main()
