#!/usr/bin/env bash
# Builds against each other on one GPU machine, one after the other, with the same serve arguments and load levels.
#   here:        bash bench/gpu_ab.sh extract REV [REV ...]    each commit's tree into ab/REV/ (git-ignored: carry
#                                                              "ab" with ".whl", ~2 MB a tree)
#   on the GPU:  OUT=... bash bench/gpu_ab.sh run "SERVE ARGS" "LOAD ARGS" ["LOAD ARGS" ...]
#                OUT=... bash bench/gpu_ab.sh startup "SERVE ARGS"       each tree's cold and warm start in turn
#                                                                          (startup_bench.py): $OUT/REV-startup.json
# Each tree in ab/ runs bench/gpu_gateway.sh in turn, in name order: the first starts cold, the next warm from the
# first's compile cache when SERVE ARGS name a --cache-dir. Each lands in $OUT/REV.json (bench/gather_runs.py), with
# its time to /health. The wheels as bench/gpu_wheels.sh says, installed first into /tmp/site.
set -uo pipefail
cd "$(dirname "$0")/.."
ASSETS=engine/models/qwen3_tts/assets       # the tokenizer: the root tree's, copied into each on the GPU
mode=$1
shift
if [ "$mode" = extract ]; then
    for rev in "$@"; do
        rm -rf "ab/$rev" && mkdir -p "ab/$rev" && git archive "$rev" | tar -x -C "ab/$rev"
        rm -rf "ab/$rev/$ASSETS" "ab/$rev/bench/results" "ab/$rev/tests" "ab/$rev/docs"   # the carry's 64 MiB
    done
    du -sh ab/*
    exit
fi
serve=$1
shift
mkdir -p /tmp/ab
[ -d /tmp/site ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:bench/stubs:integrations:. PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
for tree in ab/*/; do
    rev=$(basename "$tree")
    [ -d "$tree/$ASSETS" ] || cp -r "$ASSETS" "$tree/$ASSETS"
    if [ "$mode" = startup ]; then                  # the tree's name is its label: the checkout's HEAD is not it
        (cd "$tree" && python3 bench/startup_bench.py --serve "$serve" --out "/tmp/ab/$rev-startup" --label "$rev" \
             --cache-dir "/tmp/ab/cache-$rev" && cp "/tmp/ab/$rev-startup/startup_bench.json" "$OUT/$rev-startup.json")
        continue
    fi
    (cd "$tree" && OUT=/tmp/ab bash bench/gpu_gateway.sh "$rev" "$serve" "$@" | tee "/tmp/ab/$rev.txt"
     python3 bench/gather_runs.py "/tmp/ab/$rev" "$OUT/$rev.json" \
         --ready-s "$(grep -o 'ready after [0-9]*' "/tmp/ab/$rev.txt" | grep -o '[0-9]*$')")
done
