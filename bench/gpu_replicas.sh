#!/usr/bin/env bash
# Capacity at 1 and at 2 replicas (the 2-GPU kind): the gateway load bench against `serve --replicas N`, then the
# ratio of each `*_contexts_99` (the largest level >= 99% fully viable; goal: >= 1.9x).
#   bash bench/gpu_replicas.sh ["SERVE ARGS"]       # default: --dummy 1.7B-CustomVoice --max-frames 150
# LEVELS1 / LEVELS2: the closed-loop levels per run; TEXT: streamed and/or whole; PROXIES: proxy processes; OUT:
# where the results go; REPLICAS: which runs ("1 2"; one per call where a command may last 10 minutes: the ratio is
# printed once both are there).
set -euo pipefail
cd "$(dirname "$0")/.."
serve=${1:-"--dummy 1.7B-CustomVoice --max-frames 150"}
out=${OUT:-bench/results}/replicas
levels=([1]=${LEVELS1:-"512 768"} [2]=${LEVELS2:-"1024 1536"})
for n in ${REPLICAS:-1 2}; do
    python3 bench/load_bench.py --serve "--replicas $n --proxies ${PROXIES:-4} $serve" --concurrency ${levels[$n]} \
        --text ${TEXT:-streamed} --drain-timeout 60 --out "$out/r$n"
done
[ -f "$out/r1/load_bench.json" ] && [ -f "$out/r2/load_bench.json" ] || exit 0
python3 - "$out" <<'PY'
import json, sys
one, two = (json.load(open(f"{sys.argv[1]}/r{n}/load_bench.json"))["summary"] for n in (1, 2))
for key in sorted(k for k in one if k.endswith("_contexts_99")):
    print(f"{key}: 1 replica {one[key]}, 2 replicas {two.get(key, 0)}, ratio {two.get(key, 0) / max(one[key], 1):.2f}x")
PY
