"""Pipecat TTS service: `from qwen_tts_client.pipecat import QwenTTSService` (extra `[pipecat]`)."""
from .service import QwenTTSService, QwenTTSSettings

__all__ = ["QwenTTSService", "QwenTTSSettings"]
