"""Qwen3-TTS streaming engine: batched, exact, importable without the gateway's dependencies. Names load on first use,
so that a process that needs only the plain request types (a front end's helper) never imports torch."""
import importlib

_HOMES = {"Engine": "engine.api.engine", "AudioChunk": "engine.api.request", "EngineInputError": "engine.api.request",
          "SamplingParams": "engine.api.request", "SynthesisRequest": "engine.api.request",
          "VoiceRef": "engine.api.request", "Clock": "engine.core.clock", "REAL_CLOCK": "engine.core.clock",
          "ModelLoadError": "engine.models.weights", "default_device_dtype": "engine.models.weights"}
__all__ = list(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
