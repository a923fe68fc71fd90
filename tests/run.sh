#!/usr/bin/env bash
# Installs what the tests need (CPU-only torch, the reference implementations, Chromium) and runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
PIP="python3 -m pip install -qq --disable-pip-version-check"     # -qq: errors only
# a second run skips the installs: the stamp (in the interpreter's prefix, so a fresh machine or venv has none) holds
# the hash of this script, both pyprojects, the checkout and the interpreter, and every group's package is there
STAMP="$(python3 -c 'import sys; print(sys.prefix)')/qwen-tts-gateway-tests.stamp"
KEY="$( { cat tests/run.sh pyproject.toml integrations/pyproject.toml; pwd; command -v python3; } | sha256sum)"
# the vendors' own clients, unchanged, against the Cartesia and ElevenLabs dialects (tests/test_dialects_*.py): the
# plugins at the frameworks' pinned versions
VENDORS=(livekit-plugins-cartesia==1.8.9 livekit-plugins-elevenlabs==1.8.9 "pipecat-ai[cartesia,elevenlabs]==1.14.0"
         cartesia==4.2.0 elevenlabs==2.78.0)
# triton: its interpreter runs the GPU kernels on the CPU (tests/test_skinny_kernels.py)
TOOLS=(librosa soundfile sox einops onnxruntime scipy nagisa==0.2.11 soynlp==0.0.493 triton==3.6.0)
OFFICIAL=(qwen-tts==0.1.1 qwen-asr==0.0.6)
installed() {      # ray and playwright: the project's extras
    [ "$(cat "$STAMP" 2>/dev/null)" = "$KEY" ] && python3 - torch qwen-tts-gateway qwen-tts-client ray playwright \
        "${VENDORS[@]}" "${TOOLS[@]}" "${OFFICIAL[@]}" 2>/dev/null <<'PY'
import importlib.metadata, re, sys
for spec in sys.argv[1:]:
    importlib.metadata.distribution(re.split(r"[\[=<>@ ]", spec)[0])
PY
}
install() {
$PIP torch==2.13.0                      # the local CPU build; an unpinned torch pulls GBs of CUDA packages
# the project with its client package (a dependency by path), Ray Serve (--replicas), the test extra (with the
# transformers of the parity tests) and the client's agent frameworks, in one resolve (alone, Ray's protobuf breaks
# pipecat's); torch stays pinned so that nothing upgrades it
$PIP -e ".[test,replicas]" "qwen-tts-client[livekit,pipecat] @ file://$PWD/integrations" torch==2.13.0
$PIP --no-deps -e integrations          # the client editable too, as the project is
$PIP "${VENDORS[@]}" torch==2.13.0
$PIP "${TOOLS[@]}"
# last, the official implementations, for parity, without their pins (accelerate, gradio, transformers 4.57.3 for
# qwen-tts, ...) that the tests do not need; any later install would list each of them as a conflict
$PIP --no-deps --no-warn-conflicts "${OFFICIAL[@]}"
}
if ! installed; then
    install
    echo "$KEY" > "$STAMP" || true
fi
# Debian's Chromium for the playground's test (tests/test_playground.py), which the playwright package drives
if ! command -v chromium >/dev/null; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
        || echo "tests/run.sh: chromium could not be installed; tests/test_playground.py will be skipped"
fi
python3 -m pytest -q -rfEs "$@"                 # -rfEs: the reasons of failures, errors and skips
