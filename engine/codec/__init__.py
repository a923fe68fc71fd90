from .decoder import CodecDecoder
from .encoder import CodecEncoder
from .model import Codec

__all__ = ["Codec", "CodecDecoder", "CodecEncoder"]
from . import snake  # noqa: F401  (registers SnakeBeta's Triton kernel with fused.ops)
