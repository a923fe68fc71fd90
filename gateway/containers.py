"""OpenAI's response formats, encoded by FFmpeg (PyAV) chunk by chunk; streamed ones in containers read as they come."""
import io

import av
import numpy as np

from .audio import SOURCE_RATE
from .codecs import audio_frame
from .tempo import TimeStretch

FORMATS = {     # response_format: muxer, codec, bit rate (0: lossless), media type
    "mp3": ("mp3", "libmp3lame", 64000, "audio/mpeg"),
    "opus": ("ogg", "libopus", 32000, "audio/ogg"),
    "aac": ("adts", "aac", 64000, "audio/aac"),
    "flac": ("flac", "flac", 0, "audio/flac"),
    "wav": ("wav", "pcm_s16le", 0, "audio/wav"),
    "pcm": ("s16le", "pcm_s16le", 0, "audio/pcm"),
}
SIZED = ("wav", "flac")         # their header holds the length: whole unless the client streams
MUXER_OPTIONS = {"fflags": "+bitexact", "flush_packets": "1"}     # bitexact: no encoder tag (WAV's header is 44 bytes)
OGG_OPTIONS = {"page_duration": "20000"}                           # a page per packet, not one a second


class Pipe:
    """A sink the muxer cannot seek in; take() hands over what it wrote."""

    def __init__(self):
        self.parts: list[bytes] = []

    def write(self, data) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        data = b"".join(self.parts)
        self.parts.clear()
        return data


class ContainerEncoder:
    def __init__(self, fmt: str, streamed: bool, speed: float = 1.0, rate: int = SOURCE_RATE, bit_rate: int = 0):
        """`rate`: the PCM's (resampled before); `bit_rate`: the format's default where 0."""
        muxer, codec, default_bit_rate, self.media_type = FORMATS[fmt]
        self.streamed, self.rate = streamed, rate
        self.sink = Pipe() if streamed else io.BytesIO()
        options = {**MUXER_OPTIONS, **(OGG_OPTIONS if muxer == "ogg" else {})}
        self.container = av.open(self.sink, "w", format=muxer, options=options)
        self.stream = self.container.add_stream(codec, rate=rate, layout="mono")
        if bit_rate or default_bit_rate:
            self.stream.bit_rate = bit_rate or default_bit_rate
        self.stretch = TimeStretch(speed, rate) if speed != 1.0 else None
        self.pts = 0

    def encode(self, pcm: np.ndarray, final: bool = False) -> bytes:
        if self.stretch:
            pcm = self.stretch.push(pcm, final)
        if len(pcm):
            self.container.mux(self.stream.encode(audio_frame(pcm, self.rate, self.pts)))
            self.pts += len(pcm)
        if final:
            self.container.mux(self.stream.encode(None))
            self.container.close()
        if self.streamed:
            return self.sink.take()
        return self.sink.getvalue() if final else b""
