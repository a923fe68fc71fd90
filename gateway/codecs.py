"""FFmpeg's codecs through PyAV, without a container: the WebSocket's raw Opus packets and G.711 A-law."""
import av
import numpy as np

OPUS_PACKET_MS = 20                     # one Opus frame per packet, as WebRTC and WebCodecs take them
CODECS = {"opus": ("libopus", 32000, {"frame_duration": str(OPUS_PACKET_MS)}),    # codec, bit rate, options
          "alaw": ("pcm_alaw", 0, {})}


def audio_frame(pcm: np.ndarray, rate: int, pts: int) -> av.AudioFrame:
    frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(pcm, np.float32)[None, :], format="flt", layout="mono")
    frame.sample_rate, frame.pts = rate, pts
    return frame


class PacketEncoder:
    """One utterance's PCM -> the codec's packets as they are ready; the final chunk drains the codec."""

    def __init__(self, encoding: str, rate: int):
        self.codec, self.bit_rate, self.options = CODECS[encoding]
        self.rate, self.context, self.pts = rate, None, 0

    def encode(self, pcm: np.ndarray, final: bool = False) -> list[bytes]:
        if self.context is None:
            self.context, self.pts = self._open(), 0
        packets = self.context.encode(audio_frame(pcm, self.rate, self.pts)) if len(pcm) else []
        self.pts += len(pcm)
        if final:
            packets += self.context.encode(None)
            self.context = None
        return [bytes(packet) for packet in packets]

    def _open(self) -> av.AudioCodecContext:
        context = av.CodecContext.create(self.codec, "w")
        context.sample_rate, context.layout, context.bit_rate = self.rate, "mono", self.bit_rate
        context.format = context.codec.audio_formats[0]      # PyAV converts the float frames to it
        context.options = self.options
        context.open()
        return context
