from .decoder import CodecDecoder
from .encoder import CodecEncoder
from .model import Codec

__all__ = ["Codec", "CodecDecoder", "CodecEncoder"]
