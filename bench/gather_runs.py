"""One JSON of a `bench/gpu_gateway.sh` directory: every runK's load_bench.json, /metrics and gauges each second
(series: name -> [[s, value], ...]), and serve's start-up lines (a device call returns few files).

python3 bench/gather_runs.py DIR OUT.json [--ready-s S]"""
import argparse
import json
from pathlib import Path


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
    for run in sorted(args.dir.glob("run*"), key=lambda p: int(p.name[3:])):
        results = run / "load_bench.json"
        metrics, series = run / "metrics.txt", {}
        for line in (run / "series.txt").read_text().splitlines() if (run / "series.txt").exists() else []:
            if len(fields := line.split()) == 3:        # a scrape cut short writes less
                series.setdefault(fields[1], []).append([int(fields[0]), float(fields[2])])
        gathered["runs"][run.name] = dict(
            load_bench=json.loads(results.read_text()) if results.exists() else None,
            metrics=[line for line in metrics.read_text().splitlines() if line and not line.startswith("#")]
            if metrics.exists() else None, series=series)
    args.out.write_text(json.dumps(gathered, indent=1))


if __name__ == "__main__":
    main()
