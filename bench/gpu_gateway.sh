#!/usr/bin/env bash
# One server, several load_bench runs against it, and a py-spy profile of serve's processes during one of them.
#   bash bench/gpu_gateway.sh NAME "SERVE ARGS" "LOAD ARGS" ["LOAD ARGS" ...]
# Everything lands in ${OUT:-bench/results}/NAME (serve.log, runK/load_bench.json, runK/metrics.txt: /metrics after
# the run, runK/series.txt: the engine's gauges each second through it, profile-*.txt); PROFILE_RUN=K samples run K
# (default none) for PROFILE_S seconds (default 20) after PROFILE_AFTER seconds (default 25), at PROFILE_HZ (default
# 20; PROFILE_FLAGS: py-spy's own, e.g. "--native --gil"): py-spy pauses each process it samples, and at 100 Hz over
# every serve process it took 1,024 contexts at 1 character / 5 ms from 98.2% to 15.7% fully viable. KEEP=1 leaves
# serve running (in its own session) for the next call on the warm machine, which reuses it (its SERVE ARGS unread).
set -uo pipefail
cd "$(dirname "$0")/.."
name=$1 serve=$2
shift 2
out=${OUT:-bench/results}/$name
mkdir -p "$out"
if curl -sf localhost:8000/health > /dev/null; then      # KEEP=1 left one running: the next call reuses it
    pid=$(pgrep -f "gateway.cli serve" | head -1)
    echo "serve already running ($pid)"
else
    setsid python3 -m gateway.cli serve $serve --port 8000 > "$out/serve.log" 2>&1 &
    pid=$!
    until curl -sf localhost:8000/health > /dev/null; do
        kill -0 $pid 2> /dev/null || { tail -30 "$out/serve.log"; exit 1; }
        sleep 2
    done
    echo "serve ready after ${SECONDS}s"
fi
GAUGES='^tts_(engine_(active|step_ms|listener_dry_chunks|step_capacity_streams|gpu_[a-z]+_ms)|admission_queue_length|'\
'refused_requests|aligner_(used|capacity|queued_jobs))$'
run=0
for load in "$@"; do
    run=$((run + 1))
    python3 bench/load_bench.py --url ws://127.0.0.1:8000 $load --out "$out/run$run" &
    bench=$!
    mkdir -p "$out/run$run"
    while sleep 1; do          # the engine's gauges each second: what a level's averages hide
        curl -sf localhost:8000/metrics | awk -v t=$SECONDS -v keep="$GAUGES" 'NF == 2 && $1 ~ keep {print t, $1, $2}'
    done > "$out/run$run/series.txt" &
    sampler=$!
    if [ "$run" = "${PROFILE_RUN:-0}" ] && command -v py-spy > /dev/null; then
        sleep "${PROFILE_AFTER:-25}"
        for p in $pid $(pgrep -P $pid); do        # the front ends and the engine core (its child)
            py-spy record -p "$p" -d "${PROFILE_S:-20}" -r "${PROFILE_HZ:-20}" --format raw --threads \
                ${PROFILE_FLAGS:-} -o "$out/profile-$p.txt" > /dev/null 2>&1 &
        done
    fi
    wait $bench
    kill $sampler
    curl -sf localhost:8000/metrics > "$out/run$run/metrics.txt"    # the admission queue's counters among them
done
[ -n "${KEEP:-}" ] && { echo "serve left running for the next call"; exit 0; }
kill -INT $pid
while kill -0 $pid 2> /dev/null; do sleep 1; done
echo "done after ${SECONDS}s"
