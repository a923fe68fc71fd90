"""The engine's PCM -> a socket's audio (pcm_s16le, mulaw, alaw, opus), resampled streaming-exact."""
import asyncio
from math import gcd

import numpy as np

from engine.models.qwen3_tts import SAMPLE_RATE as SOURCE_RATE  # the default only: callers pass info["sample_rate"]

from .codecs import CODECS, OPUS_PACKET_MS, PacketEncoder


class Resampler:
    def __init__(self, rate: int, source: int = SOURCE_RATE, zero_crossings: int = 16):
        g = gcd(rate, source)
        self.up, self.down = rate // g, source // g
        span = max(self.up, self.down)
        n = 2 * zero_crossings * span + 1
        self.delay = (n - 1) // 2
        t = np.arange(n) - self.delay
        cutoff = 0.45 / span                         # 90% of the lower Nyquist frequency, at the upsampled rate
        taps = 2 * cutoff * np.sinc(2 * cutoff * t) * np.kaiser(n, 8.6) * self.up
        self.width = -(-n // self.up)
        taps = np.concatenate([taps, np.zeros(self.width * self.up - n)])
        self.phases = taps.reshape(self.width, self.up).T[:, ::-1].copy()   # [phase, oldest..newest input]
        self.reset()

    def reset(self) -> None:
        self.buf = np.zeros(self.width - 1)          # inputs from index self.base on; zeros before the stream
        self.base, self.received, self.emitted = 1 - self.width, 0, 0

    def _emit(self, end: int) -> np.ndarray:
        m = np.arange(self.emitted, max(end, self.emitted))
        t = m * self.down + self.delay
        newest = t // self.up - self.base
        windows = self.buf[newest[:, None] + np.arange(1 - self.width, 1)[None, :]]
        out = (windows * self.phases[t % self.up]).sum(axis=1)
        self.emitted += len(m)
        keep = (self.emitted * self.down + self.delay) // self.up - (self.width - 1)
        self.buf, self.base = self.buf[keep - self.base:], keep
        return out.astype(np.float32)

    def push(self, pcm: np.ndarray) -> np.ndarray:
        self.buf = np.concatenate([self.buf, pcm.astype(np.float64)])
        self.received += len(pcm)
        return self._emit((self.up * self.received - 1 - self.delay) // self.down + 1)

    def finish(self) -> np.ndarray:
        total = -(-self.received * self.up // self.down)
        last_needed = ((total - 1) * self.down + self.delay) // self.up
        pad = max(0, last_needed + 1 - (self.base + len(self.buf)))
        self.buf = np.concatenate([self.buf, np.zeros(pad)])
        out = self._emit(total)
        self.reset()
        return out


def to_pcm16(pcm: np.ndarray) -> np.ndarray:
    return (np.clip(pcm, -1.0, 1.0) * 32767.0).round().astype("<i2")


def to_mulaw(pcm: np.ndarray) -> bytes:
    s = to_pcm16(pcm).astype(np.int32)
    magnitude = np.minimum(np.abs(s), 32635) + 0x84
    exponent = np.frexp(magnitude)[1] - 8                       # floor(log2(magnitude)) - 7, in 0..7
    mantissa = (magnitude >> (exponent + 3)) & 0x0F
    return (~(((s < 0) << 7) | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8).tobytes()


def mulaw_to_pcm16(data: bytes) -> np.ndarray:
    u = ~np.frombuffer(data, np.uint8).astype(np.int32) & 0xFF
    magnitude = (((u & 0x0F) << 3) + 0x84 << ((u >> 4) & 0x07)) - 0x84
    return np.where(u & 0x80, -magnitude, magnitude).astype(np.int16)


class AudioEncoder:
    """One continuous audio stream -> the socket's audio messages; reusable after the final chunk."""

    def __init__(self, sample_rate: int = SOURCE_RATE, encoding: str = "pcm_s16le", source: int = SOURCE_RATE):
        self.sample_rate, self.encoding = sample_rate, encoding
        self.resampler = Resampler(sample_rate, source) if sample_rate != source else None
        self.codec = PacketEncoder(encoding, sample_rate) if encoding in CODECS else None

    def encode(self, pcm: np.ndarray, final: bool = False) -> list[tuple[bytes, int]]:
        if self.resampler:
            pcm = np.concatenate([self.resampler.push(pcm), self.resampler.finish()]) if final else \
                self.resampler.push(pcm)
        if self.encoding == "opus":
            return [(packet, self.sample_rate * OPUS_PACKET_MS // 1000) for packet in self.codec.encode(pcm, final)]
        if self.codec:
            data = b"".join(self.codec.encode(pcm, final))
        else:
            data = to_pcm16(pcm).tobytes() if self.encoding == "pcm_s16le" else to_mulaw(pcm)
        return [(data, len(pcm))] if len(pcm) else []

    async def encode_async(self, pcm: np.ndarray, final: bool = False) -> list[tuple[bytes, int]]:
        """Opus encodes in a thread, so that the loop's other sockets do not wait for it."""
        if self.encoding == "opus":
            return await asyncio.to_thread(self.encode, pcm, final)
        return self.encode(pcm, final)

