"""16-bit PCM WAV read/write with the standard library."""
import wave

import numpy as np


def write_wav(path, pcm: np.ndarray, rate: int = 24000) -> None:
    data = (np.clip(pcm, -1.0, 1.0) * 32767.0).round().astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(data.tobytes())


def read_wav(path) -> tuple[np.ndarray, int]:
    """Mono float32 (channels averaged) and the sample rate."""
    with wave.open(path if hasattr(path, "read") else str(path), "rb") as w:
        width, channels, rate = w.getsampwidth(), w.getnchannels(), w.getframerate()
        raw = w.readframes(w.getnframes())
    if width not in (1, 2, 4):
        raise ValueError(f"{path}: unsupported WAV sample width {width * 8} bits")
    return decode_pcm(raw, width, channels), rate


def decode_pcm(raw: bytes, width: int, channels: int) -> np.ndarray:
    """Integer PCM of 1, 2 or 4 bytes a sample -> mono float32 (channels averaged)."""
    if width == 1:
        data = (np.frombuffer(raw, np.uint8).astype(np.float32) - 128.0) / 128.0
    else:
        kind = "<i2" if width == 2 else "<i4"
        data = np.frombuffer(raw, kind).astype(np.float32) / float(2 ** (8 * width - 1))
    return data.reshape(-1, channels).mean(axis=1)
