"""Qwen3-TTS streaming engine: batched, exact, importable without the gateway's dependencies."""
from engine.api.engine import Engine
from engine.api.request import AudioChunk, EngineInputError, SamplingParams, SynthesisRequest, VoiceRef

__all__ = ["Engine", "AudioChunk", "EngineInputError", "SamplingParams", "SynthesisRequest", "VoiceRef"]
