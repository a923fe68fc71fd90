"""An `audio` message's binary frame: version, context id length, id (UTF-8), seq, sample offset (uint32 LE), audio."""
import struct

from .messages import Audio

AUDIO_FRAME_VERSION = 1

_HEADER = struct.Struct("<II")


def pack_audio(context_id: str, seq: int, sample_offset: int, audio: bytes) -> bytes:
    cid = context_id.encode("utf-8")
    return bytes((AUDIO_FRAME_VERSION, len(cid))) + cid + _HEADER.pack(seq, sample_offset & 0xFFFFFFFF) + audio


def unpack_audio(frame: bytes) -> Audio:
    if len(frame) < 2 or frame[0] != AUDIO_FRAME_VERSION or len(frame) < 2 + frame[1] + _HEADER.size:
        raise ValueError("not a protocol v1 audio frame")
    n = frame[1]
    seq, offset = _HEADER.unpack_from(frame, 2 + n)
    return Audio(frame[2:2 + n].decode("utf-8"), seq, offset, frame[2 + n + _HEADER.size:])
