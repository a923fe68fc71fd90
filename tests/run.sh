#!/usr/bin/env bash
# Installs what the tests need (CPU-only torch, the reference implementations) and runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
PIP="python3 -m pip install -q --disable-pip-version-check"
$PIP torch==2.13.0                      # the local CPU build; an unpinned torch pulls GBs of CUDA packages
# the project with its client package (a dependency by path), Ray Serve (--replicas) and the client's agent
# frameworks, for tests/test_integrations_*.py, in one resolve (alone, Ray's protobuf breaks pipecat's); torch stays
# pinned so that nothing upgrades it
$PIP -e ".[test,replicas]" "./clients/python[livekit,pipecat]" "transformers==4.57.6" torch==2.13.0
$PIP --no-deps -e clients/python        # the client editable too, as the project is
# the official implementations, for parity: qwen-tts pins transformers 4.57.3 (works with 4.57.6), so no deps
$PIP --no-deps qwen-tts==0.1.1 qwen-asr==0.0.6
$PIP librosa soundfile sox einops onnxruntime scipy nagisa==0.2.11 soynlp==0.0.493
$PIP triton==3.6.0                      # its interpreter runs the GPU kernels on the CPU (tests/test_skinny_kernels.py)
python3 -m pytest -q "$@"
