"""LiveKit Agents plugin: `from integrations.livekit import QwenTTS` (extra `[livekit]`)."""
import logging

from livekit.agents import Plugin

from .tts import QwenTTS

__all__ = ["QwenTTS"]
__version__ = "0.1.0"


class QwenTTSPlugin(Plugin):
    def __init__(self):
        super().__init__("qwen-tts-gateway", __version__, __package__, logging.getLogger(__name__))


Plugin.register_plugin(QwenTTSPlugin())
