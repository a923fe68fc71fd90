"""Qwen3-TTS streaming engine: batched, exact, importable without the gateway's dependencies."""
from engine.api.engine import Engine
from engine.api.request import AudioChunk, EngineInputError, SamplingParams, SynthesisRequest, VoiceRef
from engine.core.clock import REAL_CLOCK, Clock
from engine.models.weights import ModelLoadError, default_device_dtype

__all__ = ["Engine", "AudioChunk", "EngineInputError", "SamplingParams", "SynthesisRequest", "VoiceRef", "Clock",
           "REAL_CLOCK", "ModelLoadError", "default_device_dtype"]
