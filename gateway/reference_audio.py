"""A clone voice's reference audio (base64 WAV) decoded and resampled to the model's rate in a process of its own: a
16 MiB body's base64, PCM and resampling hold an interpreter ~0.2 s, which would stall the front end's sockets, or
the engine core's step beside it."""
import asyncio
import base64
import binascii
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from engine.api.request import EngineInputError
from engine.api.voice_input import INVALID_AUDIO, read_reference_wav, resample

MAX_WAITING = 4


def decode(data: str, target_rate: int) -> np.ndarray:
    """Mono float32 at `target_rate`; EngineInputError for anything that is not an allowed WAV."""
    try:
        wav = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise EngineInputError(INVALID_AUDIO, f"'audio' must be a base64 WAV file ({exc})") from None
    audio, rate = read_reference_wav(wav)
    return resample(audio, rate, target_rate)


class ReferenceDecoder:
    """One worker process, started at the first registration (spawned: it imports neither torch nor the server)."""

    def __init__(self):
        self.pool: ProcessPoolExecutor | None = None
        self.waiting = 0

    async def decode(self, data: str, target_rate: int) -> np.ndarray:
        if self.waiting >= MAX_WAITING:
            raise EngineInputError("busy", f"{MAX_WAITING} reference audios are being read here; retry shortly")
        if self.pool is None:
            self.pool = ProcessPoolExecutor(1, multiprocessing.get_context("spawn"))
        self.waiting += 1
        try:
            return await asyncio.wrap_future(self.pool.submit(decode, data, target_rate))
        finally:
            self.waiting -= 1

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
