"""WAV files built byte by byte, so that a header may claim any rate, width, channel count or size."""
import struct


def wav_bytes(rate: int, frames: int, channels: int = 1, width: int = 2, claimed: int | None = None,
              data: bytes | None = None) -> bytes:
    """`frames` of silence (or `data`) under a header claiming `claimed` frames (default: the truth)."""
    data = bytes(frames * channels * width) if data is None else data
    size = len(data) if claimed is None else claimed * channels * width
    fmt = struct.pack("<HHIIHH", 1, channels, rate & 0xFFFFFFFF, (rate * channels * width) & 0xFFFFFFFF,
                      (channels * width) & 0xFFFF, (8 * width) & 0xFFFF)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", size & 0xFFFFFFFF)
    return b"RIFF" + struct.pack("<I", (len(body) + len(data)) & 0xFFFFFFFF) + body + data
