"""The socket's audio format, chosen by the query parameters of `GET /v1/tts/websocket`."""
from dataclasses import dataclass
from typing import Mapping

from .codes import INVALID_PARAMETER
from .messages import ProtocolError

SAMPLE_RATES = (24000, 16000, 8000)
DEFAULT_SAMPLE_RATE = SAMPLE_RATES[0]        # the model's own: no resampling
ENCODINGS = ("pcm_s16le", "mulaw", "alaw", "opus")
AUDIO_FORMATS = ("binary", "base64")


@dataclass
class StreamFormat:
    sample_rate: int = DEFAULT_SAMPLE_RATE
    encoding: str = "pcm_s16le"
    audio_format: str = "binary"

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> "StreamFormat":
        rate = query.get("sample_rate", str(DEFAULT_SAMPLE_RATE))
        if rate not in [str(r) for r in SAMPLE_RATES]:         # not int(): '²' is a digit that int() refuses
            raise ProtocolError(INVALID_PARAMETER, f"sample_rate must be one of {SAMPLE_RATES}")
        fmt = cls(int(rate), query.get("encoding", "pcm_s16le"), query.get("audio_format", "binary"))
        if fmt.encoding not in ENCODINGS:
            raise ProtocolError(INVALID_PARAMETER, f"encoding must be one of {ENCODINGS}")
        if fmt.audio_format not in AUDIO_FORMATS:
            raise ProtocolError(INVALID_PARAMETER, f"audio_format must be one of {AUDIO_FORMATS}")
        return fmt

    def to_query(self) -> dict[str, str]:
        return {"sample_rate": str(self.sample_rate), "encoding": self.encoding, "audio_format": self.audio_format}
