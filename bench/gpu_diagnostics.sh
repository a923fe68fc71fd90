#!/usr/bin/env bash
# The in-process GPU checks and kernel comparisons that decide defaults, in one device call (about 8 minutes on an H100):
#   bash bench/gpu_diagnostics.sh
# 1. bench/gpu_check.py bfloat16 1.7B-CustomVoice: graphs + kernels against the eager path and the codec's GEMM convs
#    against cuDNN's (~100 s warm on an H100 at dfcc8cf's timings; float32 and 1.7B-Base add ~250 s: a later call);
# 2. bench/stage_bench.py --codec-conv cudnn gemm: the codec decoder's ms and graph capture s for each choice;
# 3. bench/aligner_bench.py --front-end ...: the aligner's forward a second of audio for each conv front end.
# Logs and JSON land in ${OUT:-bench/results}/diagnostics; each step has its own time limit (580 s in all), so one
# that hangs leaves the others' results; STEPS="stages aligner" runs only those.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/results}/diagnostics
mkdir -p "$out"
step() {        # NAME SECONDS COMMAND...
    local name=$1 limit=$2 t0=$SECONDS
    shift 2
    [[ " ${STEPS:-gpu_check stages aligner} " == *" $name "* ]] || return 0
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    echo "$name: exit $? after $((SECONDS - t0)) s"
    tail -4 "$out/$name.log"
}
step gpu_check 160 python3 bench/gpu_check.py bfloat16 1.7B-CustomVoice
step stages 210 python3 bench/stage_bench.py --dummy 1.7B-CustomVoice --batches 512 1024 2048 --context 160 \
    --codec-conv cudnn gemm --max-active 1024 --json "$out/stages.json"
step aligner 210 python3 bench/aligner_bench.py --dummy --concurrency --batches 32 64 128 --windows 2 4 8 \
    --front-end cudnn channels_last gemm first_gemm --kernels 64 --json "$out/aligner.json"
