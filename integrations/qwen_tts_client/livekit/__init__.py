"""LiveKit Agents plugin: `from qwen_tts_client.livekit import QwenTTS` (extra `[livekit]`)."""
import logging

from livekit.agents import Plugin

from .. import __version__
from .tts import QwenTTS

__all__ = ["QwenTTS"]


class QwenTTSPlugin(Plugin):
    def __init__(self):
        super().__init__(__name__, __version__, __package__, logging.getLogger(__name__))


Plugin.register_plugin(QwenTTSPlugin())
