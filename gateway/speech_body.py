"""One-shot speech's response, shared by the OpenAI route and the dialects' HTTP routes: each chunk encoded off the
event loop (an MP3 or Opus encode never holds up another socket), the first piece awaited before the status is sent
(a refusal answers as an error), the engine request ended however the response ends."""
import asyncio
import logging
from typing import AsyncIterator, Callable

import numpy as np
from starlette.responses import StreamingResponse

from .engine_stream import EngineStream

log = logging.getLogger("qwen_tts_gateway")
Encode = Callable[[np.ndarray, bool], bytes]        # (pcm, final) -> the response's bytes


async def opened(stream: EngineStream, encode: Encode) -> tuple[bytes, AsyncIterator[bytes]]:
    """The first encoded piece (b"" for no audio) and the rest; a refusal (busy, unknown voice) raises here."""
    pieces = _encoded(stream, encode)
    try:
        return await anext(pieces, b""), pieces
    except BaseException:
        stream.cancel()
        raise


async def _encoded(stream: EngineStream, encode: Encode) -> AsyncIterator[bytes]:
    async for chunk in stream.chunks():
        if data := await asyncio.to_thread(encode, chunk.pcm, chunk.final):
            yield data


async def audio_body(first: bytes, pieces: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    try:
        yield first
        async for data in pieces:
            yield data
    except Exception:
        log.exception("streamed speech request failed")    # the status is sent: the body just ends early


class StreamedSpeech(StreamingResponse):
    """Ends the engine request however the response ends, even if the body was never started (client gone)."""

    def __init__(self, stream: EngineStream, content, media_type: str, headers: dict | None = None):
        super().__init__(content, media_type=media_type, headers=headers)
        self.stream = stream

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self.stream.finish_reason is None:
                self.stream.cancel()
