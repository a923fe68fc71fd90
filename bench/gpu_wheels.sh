#!/usr/bin/env bash
# Wheels for the GPU machine (Python 3.12, no network there) into `.whl/` (git-ignored), carried with the device run
# (`carry: [".whl"]`; at most 64 MiB). `bash bench/gpu_wheels.sh`: the gateway's (serve, load_bench.py; PyAV alone is
# 36 MB) and py-spy (to sample serve's processes); `bash bench/gpu_wheels.sh official`: the official qwen-tts's
# instead (for engine_bench.py --official), which do not fit beside them. On the machine:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site:bench/stubs:integrations PATH=/tmp/site/bin:$PATH   # integrations/: the client
# transformers 4.57 (as the tests pin it) shadows the image's 5.x and wants tokenizers <= 0.23.0 and
# huggingface_hub < 1.0; librosa's numba is bench/stubs/numba (llvmlite's 60 MB wheel does not fit the carry; the
# benchmarks' paths run no jitted code).
# `bash bench/gpu_wheels.sh replicas`: ray[serve] for `serve --replicas` (the image has no ray; its wheel alone is 76 MB,
# over a carry) into .whl-ray1/ and .whl-ray2/ (about 55 MB each: the ray wheel cut in two, then its dependencies that
# the gateway's wheels and the image lack), carried in two calls on the same warm machine, which keeps them:
#   call 1, carry .whl-ray1:  cp -r .whl-ray1 /tmp/
#   call 2, carry .whl-ray2:  cat /tmp/.whl-ray1/ray.part.* .whl-ray2/ray.part.* > /tmp/$(cat .whl-ray2/NAME);
#                             pip install ... --target /tmp/site /tmp/ray-*.whl .whl-ray2/*.whl
#   then, carry .whl:         the gateway's wheels as above, and bench/gpu_replicas.sh
# `bash bench/gpu_wheels.sh fa4`: FlashAttention 4 (CuTe DSL, for bench/attention_bench.py) into .whl-fa4a/ and
# .whl-fa4b/ (its CUDA 12 DSL libraries are 92 MB: cut in two), carried in two calls on the same warm machine:
#   call 1, carry .whl-fa4a:  cp -r .whl-fa4a /tmp/
#   call 2, carry .whl-fa4b:  cat /tmp/.whl-fa4a/libs.part.* .whl-fa4b/libs.part.* > /tmp/$(cat .whl-fa4b/NAME);
#                             pip install ... --target /tmp/fa4 /tmp/nvidia_cutlass_dsl_libs_cu12-*.whl .whl-fa4b/*.whl
#                             PYTHONPATH=/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages (a .pth --target skips)
#   (the image has torch 2.11+cu130, einops, cuda-bindings and cuda-pathfinder)
set -euo pipefail
cd "$(dirname "$0")/.."
platforms="--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any"
if [ "${1:-}" = fa4 ]; then
    rm -rf .whl-fa4a .whl-fa4b && mkdir .whl-fa4a .whl-fa4b
    python3 -m pip download -q --no-deps --pre --only-binary=:all: $platforms -d .whl-fa4b flash-attn-4==4.0.0b36 \
        nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 nvidia-cutlass-dsl-libs-core==4.8.1 \
        nvidia-cutlass-dsl-libs-cu12==4.8.1 apache-tvm-ffi==0.1.15.post2 torch-c-dlpack-ext==0.1.5 \
        quack-kernels==0.6.5
    libs=$(cd .whl-fa4b && ls nvidia_cutlass_dsl_libs_cu12-*.whl)
    echo "$libs" > .whl-fa4b/NAME
    split -b 50M -d ".whl-fa4b/$libs" .whl-fa4b/libs.part. && rm ".whl-fa4b/$libs"
    mv .whl-fa4b/libs.part.00 .whl-fa4a/
    du -sh .whl-fa4a .whl-fa4b
    exit
fi
if [ "${1:-}" = replicas ]; then
    rm -rf .whl-ray1 .whl-ray2 && mkdir .whl-ray1 .whl-ray2
    python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform any -d .whl-ray2 "ray[serve]==2.60.0" protobuf==6.33.6        # protobuf as deploy/ pins it
    # the image's numpy stays; the gateway's pinned wheels (.whl) win
    (cd .whl-ray2 && rm -f numpy-* py_spy-* uvloop-* starlette-* uvicorn-* websockets-* anyio-* h11-* click-* \
        certifi-* idna-* sniffio-* httpx-* httpcore-*)
    ray=$(cd .whl-ray2 && ls ray-2*.whl)
    echo "$ray" > .whl-ray2/NAME
    split -b 50M -d ".whl-ray2/$ray" .whl-ray2/ray.part. && rm ".whl-ray2/$ray" && mv .whl-ray2/ray.part.00 .whl-ray1/
    du -sh .whl-ray1 .whl-ray2
    exit
fi
gateway="starlette==1.10.0 uvicorn==0.54.0 h11==0.16.0 click==8.4.0 websockets==17.4 anyio==4.16.0 sniffio==1.3.1
    httpx==0.28.1 httpcore==1.0.9 certifi==2026.5.20 idna==3.20 pyzmq==27.3.0 uvloop==0.23.0 av==18.1.0 py-spy==0.4.3
    orjson==3.13.0"
official="qwen-tts==0.1.1 transformers==4.57.6 tokenizers==0.22.2 huggingface_hub==0.36.2 librosa==0.11.0
    soundfile==0.13.1 cffi==2.0.0 pycparser==3.0 soxr==1.0.0 audioread==3.1.0 lazy_loader==0.6 decorator==5.2.1
    msgpack==1.2.4 pooch==1.9.0 joblib==1.6.0 threadpoolctl==3.8.0 scikit-learn==1.9.1 sox==1.4.1 einops==0.8.2
    requests==2.34.2 urllib3==2.7.0 idna==3.20 certifi==2026.5.20 charset_normalizer==3.4.7 platformdirs==4.14.8"
rm -rf .whl && mkdir .whl
python3 -m pip download -q --no-deps --only-binary=:all: $platforms \
    -d .whl $([ "${1:-}" = official ] && echo "$official" || echo "$gateway")
du -sh .whl
