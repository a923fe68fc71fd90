"""Qwen3-TTS streaming engine: batched, exact, importable without the gateway's dependencies."""
from .engine import Engine
from .request import AudioChunk, EngineInputError, SamplingParams, SynthesisRequest, VoiceRef

__all__ = ["Engine", "AudioChunk", "EngineInputError", "SamplingParams", "SynthesisRequest", "VoiceRef"]
