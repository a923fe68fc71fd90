"""The Qwen3-TTS gateway's client side, without torch: protocol, client and framework integrations."""
__version__ = "0.1.0"
