from engine.models.qwen3_tts.codec.decoder import CodecDecoder
from engine.models.qwen3_tts.codec.encoder import CodecEncoder
from engine.models.qwen3_tts.codec.model import Codec

__all__ = ["Codec", "CodecDecoder", "CodecEncoder"]
