# The gateway on a CUDA runtime: `serve` is the entrypoint, /health the health check. Run it as README's Container says.
FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04
ENV DEBIAN_FRONTEND=noninteractive PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PATH=/opt/venv/bin:$PATH \
    QWEN_TTS_GATEWAY_VOICES=/voices QWEN_TTS_GATEWAY_CACHE=/cache/compile HF_HOME=/models/hub
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv curl \
    && rm -rf /var/lib/apt/lists/* && python3 -m venv /opt/venv
WORKDIR /app
COPY deploy/requirements.txt deploy/requirements.txt
RUN pip install -r deploy/requirements.txt
COPY pyproject.toml README.md ./
COPY integrations integrations
COPY engine engine
COPY aligner aligner
COPY gateway gateway
RUN pip install --no-deps ./integrations .
VOLUME ["/models", "/voices", "/cache"]
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=600s CMD curl -sf http://127.0.0.1:8000/health || exit 1
ENTRYPOINT ["qwen-tts-gateway", "serve", "--host", "0.0.0.0", "--port", "8000"]
CMD ["--model", "/models/Qwen3-TTS-12Hz-1.7B-CustomVoice"]
