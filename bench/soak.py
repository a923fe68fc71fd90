"""The soak: the real `serve` under steady streamed load for a long time, with cancels and aborted sockets mixed in.
Every --sample-s it records serve's memory (RSS of all its processes), the GPU's memory in use and /metrics; at the
end, whether anything leaked (slots, contexts, sockets, KV reservations back to 0) and every context's ending.

python3 bench/soak.py --serve "--dummy 1.7B-CustomVoice --max-frames 150" --concurrency 360 --duration 1800"""
import argparse
import json
import multiprocessing
import re
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.load_server import ServeProcess, health  # noqa: E402
from bench.load_socket import Speech  # noqa: E402
from bench.metrics_watch import parse  # noqa: E402
from bench.soak_client import SoakJob, run_soak_client  # noqa: E402
from bench.workload import workload  # noqa: E402

GAUGES = ("tts_generating_requests", "tts_active_contexts", "tts_sockets", "tts_kv_reserved_tokens",
          "tts_kv_used_tokens", "tts_queued_requests", "tts_engine_step_ms")
IDLE = ("tts_generating_requests", "tts_active_contexts", "tts_sockets", "tts_kv_reserved_tokens")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="a running server, http://host:port")
    where.add_argument("--serve", metavar="ARGS", help="start `serve ARGS` itself")
    ap.add_argument("--pid", type=int, help="with --url: serve's process, for its memory")
    ap.add_argument("--concurrency", type=int, default=360, help="contexts at once (each on its own socket)")
    ap.add_argument("--duration", type=float, default=1800.0)
    ap.add_argument("--cancel", type=float, default=0.15)
    ap.add_argument("--abort", type=float, default=0.02)
    ap.add_argument("--stream-chars", type=int, default=4)
    ap.add_argument("--stream-ms", type=float, default=15.0)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--sample-s", type=float, default=15.0)
    ap.add_argument("--serve-timeout", type=float, default=600.0)
    ap.add_argument("--out", default="bench/results/soak")
    return ap.parse_args(argv)


def read_metrics(http_url: str) -> dict:
    with urllib.request.urlopen(f"{http_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    values = parse(text, GAUGES)
    errors = {m[1]: float(m[2]) for m in re.finditer(r'^tts_errors_total\{code="(\w+)"\} ([\d.]+)$', text, re.M)}
    return dict({g: values.get(g, 0.0) for g in GAUGES}, errors=errors)


def gpu_memory_mib() -> float | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
        return sum(float(x) for x in out.split())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def rss_mib(pid: int | None) -> float:
    """serve's processes together; a child that exits meanwhile (torch.compile's workers) counts nothing."""
    if pid is None:
        return 0.0
    root = psutil.Process(pid)
    total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / 2 ** 20


def sample(http_url: str, pid: int | None, t0: float) -> dict:
    return dict(t=round(time.monotonic() - t0, 1), rss_mib=round(rss_mib(pid), 1), gpu_mib=gpu_memory_mib(),
                **read_metrics(http_url))


def start_clients(args, ws_url: str):
    texts = [text for text, _ in workload(1000, 0)]
    speech = Speech({}, args.stream_chars, args.stream_ms, idle_timeout=60.0)
    mp = multiprocessing.get_context("spawn")
    pipes = []
    for i in range(args.clients):
        slots = args.concurrency // args.clients + (i < args.concurrency % args.clients)
        receive, send = mp.Pipe(duplex=False)
        job = SoakJob(ws_url, speech, texts, slots, args.duration, args.cancel, args.abort, seed=i)
        mp.Process(target=run_soak_client, args=(job, send), daemon=True).start()
        send.close()
        pipes.append(receive)
    return pipes


def verdict(timeline: list[dict], results: list[dict], settled: dict) -> dict:
    warm = next((s for s in timeline if s["t"] >= 120), timeline[0])
    endings, provoked = Counter(), Counter()
    for r in results:
        endings.update(r["endings"])
        provoked.update(r["provoked"])
    unprovoked = {k: n - provoked.get(k, 0) for k, n in endings.items() if k != "done" and n > provoked.get(k, 0)}
    return dict(contexts=sum(endings.values()), endings=dict(endings), provoked=dict(provoked), errors=unprovoked,
                audio_s=sum(r["audio_s"] for r in results), rss_mib_after_warmup=warm["rss_mib"],
                rss_mib_end=settled["rss_mib"], gpu_mib_after_warmup=warm["gpu_mib"], gpu_mib_end=settled["gpu_mib"],
                leaked={g: settled[g] for g in IDLE if settled[g]}, server_errors=settled["errors"])


def main(argv=None) -> None:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    server = ServeProcess(args.serve, out / "serve.log") if args.serve else None
    http_url = server.url if server else args.url.rstrip("/")
    pid = server.proc.pid if server else args.pid
    try:
        server.wait_ready(args.serve_timeout) if server else health(http_url)
        t0, timeline = time.monotonic(), []
        pipes = start_clients(args, http_url.replace("http", "ws", 1) + "/v1/tts/websocket")
        with open(out / "timeline.jsonl", "w") as log:
            while not all(conn.poll() for conn in pipes):
                timeline.append(sample(http_url, pid, t0))
                log.write(json.dumps(timeline[-1]) + "\n")
                log.flush()
                time.sleep(args.sample_s)
        results = [conn.recv() for conn in pipes]
        if failed := [r["failed"] for r in results if "failed" in r]:
            raise RuntimeError(f"a soak client failed:\n{failed[0]}")
        for _ in range(60):                              # the server releases what the last sockets held
            settled = sample(http_url, pid, t0)
            if not any(settled[g] for g in IDLE):
                break
            time.sleep(1)
        report = dict(args=vars(args), verdict=verdict(timeline, results, settled), settled=settled)
        (out / "soak.json").write_text(json.dumps(dict(report, timeline=timeline), indent=1))
        print(json.dumps(report["verdict"], indent=1), flush=True)
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    main()
