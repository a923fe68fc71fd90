"""One JSON of a `bench/gpu_gateway.sh` directory: every runK's load_bench.json, /metrics and gauges each second
(series: name -> [[s, value], ...]), and serve's start-up lines (a device call returns few files). Per run, from the
scrapes: where its first chunks' time went (`first_chunk`: the cumulative counters' growth over the run, as means in
ms; run1's also holds what the server did before it: its warm-up, a KEEP=1 server's earlier runs) and the GPU
timeline's medians while streams ran (`gpu_ms`).

python3 bench/gather_runs.py DIR OUT.json [--ready-s S]"""
import argparse
import json
import statistics
from pathlib import Path

FIRST_CHUNK = {"tts_engine_first_chunks": "chunks", "tts_engine_to_slot_seconds": "to_slot",
               "tts_engine_to_first_chunk_seconds": "slot_to_first_chunk",
               'tts_time_to_first_audio_seconds_sum{api="websocket"}': "ttfa",
               'tts_time_to_first_audio_seconds_count{api="websocket"}': "ttfa_count",
               'tts_chunk_relay_seconds_sum{api="websocket"}': "relay",
               'tts_chunk_relay_seconds_count{api="websocket"}': "relay_count",
               "tts_chunk_arrival_seconds_sum": "arrival", "tts_chunk_arrival_seconds_count": "arrival_count",
               "tts_chunk_core_seconds_sum": "core", "tts_chunk_core_seconds_count": "core_count"}


def counters(metrics: list[str]) -> dict:
    values = dict(line.rsplit(" ", 1) for line in metrics if line.split(" ", 1)[0] in FIRST_CHUNK)
    return {FIRST_CHUNK[name]: float(value) for name, value in values.items()}


def first_chunk(now: dict, before: dict) -> dict | None:
    """Means over the run's first chunks in ms; `rest` is TTFA less the engine's two parts (front end, IPC, the wait
    for a step boundary); `relay`, where served: every chunk's mean from the engine's send to its context; `arrival`:
    to the front end's read of it (the relay's first part); `core`: to the core joining it into its batch (the arrival's
    first part)."""
    grown = {k: v - before.get(k, 0.0) for k, v in now.items()}
    if grown.get("chunks", 0) <= 0 or grown.get("ttfa_count", 0) <= 0:
        return None
    mean = {k: round(1000 * grown[k] / grown["chunks"], 1) for k in ("to_slot", "slot_to_first_chunk")}
    ttfa = round(1000 * grown["ttfa"] / grown["ttfa_count"], 1)
    relay = {k: round(1000 * grown[k] / grown[f"{k}_count"], 1)
             for k in ("relay", "arrival", "core") if grown.get(f"{k}_count")}
    return dict(chunks=int(grown["chunks"]), ttfa=ttfa, **mean, rest=round(ttfa - sum(mean.values()), 1), **relay)


def gpu_ms(series: dict) -> dict:
    active = {t for t, v in series.get("tts_engine_active", []) if v > 0}
    return {name[len("tts_engine_gpu_"):-len("_ms")]: round(statistics.median(v for t, v in points if t in active), 2)
            for name, points in series.items() if name.startswith("tts_engine_gpu_")
            and any(t in active for t, _ in points)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--ready-s", type=float, help="seconds from serve's start to /health, as the caller measured")
    args = ap.parse_args()
    log = args.dir / "serve.log"
    gathered = dict(ready_s=args.ready_s, startup=[line.split("INFO ", 1)[-1] for line in
                    (log.read_text(errors="replace").splitlines() if log.exists() else [])
                    if "start-up:" in line or "loaded in" in line or "listening on" in line], runs={})
    before = {}
    for run in sorted(args.dir.glob("run*"), key=lambda p: int(p.name[3:])):
        results = run / "load_bench.json"
        metrics, series = run / "metrics.txt", {}
        for line in (run / "series.txt").read_text().splitlines() if (run / "series.txt").exists() else []:
            if len(fields := line.split()) == 3:        # a scrape cut short writes less
                series.setdefault(fields[1], []).append([int(fields[0]), float(fields[2])])
        lines = [line for line in metrics.read_text().splitlines() if line and not line.startswith("#")] \
            if metrics.exists() else None
        now = counters(lines or [])
        gathered["runs"][run.name] = dict(
            load_bench=json.loads(results.read_text()) if results.exists() else None, metrics=lines, series=series,
            first_chunk=first_chunk(now, before), gpu_ms=gpu_ms(series))
        before = now or before
    args.out.write_text(json.dumps(gathered, indent=1))


if __name__ == "__main__":
    main()
