"""The speech tokenizer as one module, keyed as speech_tokenizer/model.safetensors."""
from torch import nn

from engine.models.qwen3_tts.codec.decoder import CodecDecoder
from engine.models.qwen3_tts.codec.encoder import CodecEncoder


class Codec(nn.Module):
    def __init__(self, config: dict, max_streams: int = 0):
        super().__init__()
        self.encoder = CodecEncoder(config)
        self.decoder = CodecDecoder(config, max_streams)
