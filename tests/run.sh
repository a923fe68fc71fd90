#!/usr/bin/env bash
# Installs what the tests need (CPU-only torch, the reference implementations) and runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
PIP="python3 -m pip install -q --disable-pip-version-check"
$PIP torch==2.13.0                      # the local CPU build; an unpinned torch pulls GBs of CUDA packages
$PIP -e ".[test]" "transformers==4.57.6"
# the official implementations, for parity: qwen-tts pins transformers 4.57.3 (works with 4.57.6), so no deps
$PIP --no-deps qwen-tts==0.1.1 qwen-asr==0.0.6
$PIP librosa soundfile sox einops onnxruntime scipy nagisa==0.2.11 soynlp==0.0.493
python3 -m pytest -q "$@"
