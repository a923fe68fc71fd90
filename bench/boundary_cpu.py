"""CPU per client message in serve's two processes: N sockets stream tiny text pieces into a front end whose engine
core holds the tiny engine with its step held (text is taken in and tokenized, no audio is made), on this CPU.
    python3 bench/boundary_cpu.py --sockets 20 --chars 1 --ms 5 --duration 10 --out bench/results/boundary-cpu.json
Prints and writes: messages sent, the front end's and the core's CPU seconds in the window, and µs of CPU per message
in each; and the protocol decode of one text message (µs)."""
import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import subprocess
import tempfile
import time
import timeit
import urllib.request

import websockets

from qwen_tts_client import protocol as p


def run_core(address: str, streams: int) -> None:
    from engine import Engine
    from gateway.engine_process.io_loop import CoreIOLoop

    engine = Engine.load(dummy="tiny", device="cpu", max_active=streams)
    engine.scheduler.has_work = engine.scheduler.holds_audio = lambda: False     # the step held: no audio, ever
    engine.step.run = lambda: None
    engine.start()
    CoreIOLoop(engine, None, address).serve()


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        utime, stime = f.read().rsplit(")", 1)[1].split()[11:13]
    return (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def stream(url: str, n: int, chars: int, ms: float, until: float) -> int:
    sent = 0
    async with websockets.connect(url, compression=None) as ws:
        assert isinstance(p.parse_server(await ws.recv()), p.Ready)
        await ws.send(p.encode(p.Text(f"c{n}", "a" * chars)))
        next_at = time.monotonic()
        while (now := time.monotonic()) < until:
            next_at += ms / 1000
            await asyncio.sleep(max(0.0, next_at - now))
            await ws.send(p.encode(p.Text(f"c{n}", "a" * chars)))
            sent += 1
        await ws.send(p.encode(p.Cancel(f"c{n}")))
    return sent


async def load(url: str, args, pids: list[int]) -> dict:
    start = time.monotonic() + 1.0            # every socket opened before the window
    until = start + args.duration
    tasks = [asyncio.create_task(stream(url, n, args.chars, args.ms, until)) for n in range(args.sockets)]
    await asyncio.sleep(max(0.0, start - time.monotonic()))
    if args.profile:                          # py-spy: what each process spends its CPU on, in the window
        os.makedirs(args.profile, exist_ok=True)
        for name, pid in zip(("frontend", "core"), pids):
            subprocess.Popen(["py-spy", "record", "-p", str(pid), "-d", str(int(args.duration)), "-r", "100",
                              "--format", "raw", "-o", f"{args.profile}/{name}.txt"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    before = [cpu_seconds(pid) for pid in pids]
    sent = sum(await asyncio.gather(*tasks))
    after = [cpu_seconds(pid) for pid in pids]
    return dict(messages=sent, cpu_s=[b - a for a, b in zip(before, after)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sockets", type=int, default=20)
    ap.add_argument("--chars", type=int, default=1, help="characters per piece")
    ap.add_argument("--ms", type=float, default=5.0, help="ms between a socket's pieces")
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--out")
    ap.add_argument("--profile", metavar="DIR", help="py-spy profiles of both processes in the window, here")
    args = ap.parse_args()
    from gateway.frontends import run_frontend
    from gateway.limits import Limits
    from gateway.app_state import GatewayConfig

    address, port = f"ipc://{tempfile.mkdtemp(prefix='qwen-tts-bench-')}/engine", free_port()
    config = GatewayConfig(context_timeout=600, limits=Limits(max_pending_chars=10 ** 7,
                                                              max_pending_chars_per_socket=10 ** 7),
                           max_utterance_chars=10 ** 7)
    spawn = multiprocessing.get_context("spawn")
    core = spawn.Process(target=run_core, args=(address, args.sockets), daemon=True)
    core.start()
    frontend = spawn.Process(target=run_frontend, args=(config, address, "127.0.0.1", port, "warning"))
    frontend.start()
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or not core.is_alive() or not frontend.is_alive():
                    raise SystemExit("the server did not start")
                time.sleep(0.5)
        run = asyncio.run(load(f"ws://127.0.0.1:{port}/v1/tts/websocket", args, [frontend.pid, core.pid]))
    finally:
        frontend.terminate()
        frontend.join(30)
        core.kill()
    raw = p.encode(p.Text("c1", "a" * args.chars))
    parse_us = min(timeit.repeat(lambda: p.parse_client(raw), timer=time.process_time, number=20000, repeat=5)) / 20000 * 1e6
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    n = max(run["messages"], 1)
    result = dict(commit=commit, date=time.strftime("%Y-%m-%d"), machine=f"{os.cpu_count()}-core CPU",
                  sockets=args.sockets, chars=args.chars, ms=args.ms, duration_s=args.duration,
                  messages=run["messages"], messages_per_s=round(run["messages"] / args.duration),
                  frontend_cpu_s=round(run["cpu_s"][0], 2), core_cpu_s=round(run["cpu_s"][1], 2),
                  frontend_us_per_message=round(run["cpu_s"][0] / n * 1e6, 1),
                  core_us_per_message=round(run["cpu_s"][1] / n * 1e6, 1), parse_us_per_message=round(parse_us, 2))
    print(json.dumps(result))
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
