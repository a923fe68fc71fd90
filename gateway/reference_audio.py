"""A clone voice's registration body (JSON with a base64 WAV) parsed, decoded and resampled to the model's rate in a
process of its own: a 16 MiB body's JSON, base64, PCM and resampling hold an interpreter ~0.3 s (the JSON parse alone
tens of ms, in one call that keeps the GIL), which would stall the front end's sockets, or the engine core's step."""
import asyncio
import base64
import binascii
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from engine.api.request import EngineInputError
from engine.api.voice_input import INVALID_AUDIO, check_voice_name, read_reference_wav, resample
from qwen_tts_client import protocol as p

from .body import body_field, parse_json

MAX_WAITING = 4


def decode(data: str, target_rate: int) -> np.ndarray:
    """Mono float32 at `target_rate`; EngineInputError for anything that is not an allowed WAV."""
    try:
        wav = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise EngineInputError(INVALID_AUDIO, f"'audio' must be a base64 WAV file ({exc})") from None
    audio, rate = read_reference_wav(wav)
    return resample(audio, rate, target_rate)


def parse_registration(data: bytes, target_rate: int) -> dict:
    """{name, text, x_vector_only, audio: mono float32 at `target_rate`} of a registration body."""
    try:
        body = parse_json(data)
        fields = dict(name=body_field(body, "name", str) or "", text=body_field(body, "text", str),
                      x_vector_only=body_field(body, "x_vector_only", bool, False))
        audio = body_field(body, "audio", str) or ""
        check_voice_name(fields["name"])
    except p.ProtocolError as exc:          # crosses back to the front end with its code
        raise EngineInputError(exc.code, exc.message) from None
    return dict(fields, audio=decode(audio, target_rate))


class ReferenceDecoder:
    """One decoding process, started at the first registration (spawned: it imports neither torch nor the server)."""

    def __init__(self):
        self.pool: ProcessPoolExecutor | None = None
        self.waiting = 0

    async def registration(self, data: bytes, target_rate: int) -> dict:
        if self.waiting >= MAX_WAITING:
            raise EngineInputError("busy", f"{MAX_WAITING} reference audios are being read here; retry shortly")
        if self.pool is None:
            self.pool = ProcessPoolExecutor(1, multiprocessing.get_context("spawn"))
        pool = self.pool
        self.waiting += 1
        try:
            return await asyncio.wrap_future(pool.submit(parse_registration, data, target_rate))
        except BrokenProcessPool:           # its worker died (killed for memory, say): the next one starts afresh
            if self.pool is pool:
                self.pool = None
            raise
        finally:
            self.waiting -= 1

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
