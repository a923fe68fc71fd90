"""Pipecat TTS service: `from integrations.pipecat import QwenTTSService` (extra `[pipecat]`)."""
from .service import QwenTTSService, QwenTTSSettings

__all__ = ["QwenTTSService", "QwenTTSSettings"]
