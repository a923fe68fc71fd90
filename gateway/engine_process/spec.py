"""What the engine core builds: the aligner first (the KV cache takes what it leaves), then the engine, warmed up."""
import logging
import time
from dataclasses import dataclass

import numpy as np

log = logging.getLogger("qwen_tts_gateway")
GPU_MAX_STEP_MS = 64.0      # 80% of a frame: 72 ms bought 1,536 contexts 40 ms of TTFA p90 on an H200 but cost bursts


def default_max_active(device) -> int:
    """2,048 streams on a GPU of 64 GiB or more (admission holds the step within its bound below that), 1,024 on a
    smaller one, 32 on a CPU."""
    if device.type != "cuda":
        return 32
    import torch
    return 2048 if torch.cuda.get_device_properties(device).total_memory >= 64 << 30 else 1024


@dataclass
class EngineSpec:
    model: str | None = None
    dummy: str | None = None
    device: str | None = None
    dtype: str | None = None
    max_active: int | None = None                 # None: default_max_active()
    kv_tokens_per_stream: int | None = None       # None: by memory (gpu_memory_utilization; on a CPU of the RAM)
    gpu_memory_utilization: float = 0.9
    max_step_ms: float | None = None              # None: GPU_MAX_STEP_MS on CUDA, off on the CPU
    max_queue_ms: float = 500.0                   # the longest a new stream waits for room before `busy`
    aligner: str | None = None
    dummy_aligner: str | None = None              # "auto": published on CUDA, tiny on the CPU
    dummy_aligner_times: str = "speaker"          # a speaker's at an even pace (aligner/speaker_times.py), or "model"
    voices_dir: str | None = None                 # the voice registry on disk (None: voices kept in memory only)
    max_voices: int = 64                          # registered voices kept, in memory and on disk alike
    kv_cache_dtype: str = "auto"                  # the talker's KV cache: the model's dtype, or fp8
    weights_dtype: str = "auto"                   # the decoder layers' projections past a few rows: or fp8

    def build(self):
        from aligner import Aligner
        from engine import Engine, default_device_dtype
        from engine.core.startup import phase, report, report_compiles
        from engine.kernels.registry import KernelSettings, select

        device, dtype = default_device_dtype(self.device, self.dtype)
        cuda = device.type == "cuda"
        kernels = KernelSettings(kv_cache=self.kv_cache_dtype, weights=self.weights_dtype)
        t0 = time.perf_counter()
        aligner = None
        if self.aligner or self.dummy_aligner:
            with phase("kernel choice"):      # the engine's kernels and cuDNN search, which the aligner's graphs capture
                select(device, kernels)
            dummy = ("published" if cuda else "tiny") if self.dummy_aligner == "auto" else self.dummy_aligner
            aligner = Aligner.load(model=self.aligner, dummy=dummy, device=device, dtype=dtype)
            if dummy and self.dummy_aligner_times == "speaker":
                from aligner.speaker_times import SpeakerTimes
                aligner = SpeakerTimes(aligner)
            log.info("forced aligner %s loaded in %.1fs", aligner.name, time.perf_counter() - t0)
        max_active = self.max_active or default_max_active(device)
        step_ms = self.max_step_ms if self.max_step_ms is not None else GPU_MAX_STEP_MS if cuda else None
        engine = Engine.load(model=self.model, dummy=self.dummy, device=device, dtype=dtype, max_active=max_active,
                             kv_tokens_per_stream=self.kv_tokens_per_stream, max_step_ms=step_ms,
                             max_queue_ms=self.max_queue_ms, gpu_memory_utilization=self.gpu_memory_utilization,
                             voices_dir=self.voices_dir, max_voices=self.max_voices, kernels=kernels).start()
        stats = engine.stats()
        log.info("engine %s loaded in %.1fs: %d streams at most, %d KV tokens (%s), max step %s ms",
                 engine.info["model"], time.perf_counter() - t0, max_active, stats["kv_tokens"],
                 "given" if self.kv_tokens_per_stream else
                 f"{self.gpu_memory_utilization:g} of the {'GPU' if cuda else 'RAM available'}",
                 step_ms)
        with phase("warm-up"):
            aligner = warm_up(engine, aligner)
        report_compiles()
        report("engine core", time.perf_counter() - t0)
        return engine, aligner


def warm_up(engine, aligner=None):
    from aligner import AlignmentService
    from engine import SamplingParams, SynthesisRequest, VoiceRef

    request = SynthesisRequest(text="Warming up.", max_frames=4, sampling=SamplingParams(seed=0))
    rate = engine.info["sample_rate"]
    if engine.info["model_type"] == "base":
        tone = 0.1 * np.sin(np.arange(rate) * 2 * np.pi * 220 / rate).astype(np.float32)
        request.ref = VoiceRef(tone, rate, x_vector_only=True)
    for _ in engine.submit(request).iter_blocking():
        pass
    if aligner is None:
        return None
    aligner.align_units([(np.zeros(rate, np.float32), ["warming", "up"])], rate)
    return AlignmentService(aligner, side_work=engine.side_work, rate=rate).start()
