"""One SynthesizeStream is one gateway context; an interruption sends `cancel` and leaves the shared socket open."""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from livekit.agents import APIConnectionError, APIError, APIStatusError, APITimeoutError, tts, utils
from livekit.agents.voice.io import TimedString

from .. import protocol as p

from ..client import Context
from ..connection import CONNECTION_FAILED, CONNECTION_LOST, TIMEOUT, GatewayError
from ..word_pieces import WordPieces

if TYPE_CHECKING:
    from .tts import QwenTTS

log = logging.getLogger("qwen_tts_client.livekit")
STATUS = {p.UNAUTHORIZED: 401, p.BUSY: 503, p.NOT_READY: 503, p.SHUTTING_DOWN: 503, p.INTERNAL: 500}


def api_error(exc: GatewayError) -> APIError:
    if exc.code == TIMEOUT:
        return APITimeoutError(exc.message)
    if exc.code in (CONNECTION_FAILED, CONNECTION_LOST):
        return APIConnectionError(exc.message, retryable=exc.retryable)
    return APIStatusError(exc.message, status_code=STATUS.get(exc.code, 500 if exc.retryable else 400),
                          body={"code": exc.code}, retryable=exc.retryable)


def timed(pieces: WordPieces, words: p.Words) -> list[TimedString]:
    return [TimedString(piece, start_time=start, end_time=end) for piece, start, end in pieces.pieces(words)]


class QwenSynthesizeStream(tts.SynthesizeStream):
    def __init__(self, *, tts: QwenTTS, conn_options):
        super().__init__(tts=tts, conn_options=conn_options)
        self._client, self._options = tts._client, dict(tts._options)

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        try:
            ctx = await self._client.open_context(**self._options)
        except GatewayError as exc:
            raise api_error(exc) from None
        output_emitter.initialize(request_id=ctx.id, sample_rate=self._tts.sample_rate, num_channels=1,
                                  mime_type="audio/pcm", stream=True)
        output_emitter.start_segment(segment_id=ctx.id)
        text = WordPieces()
        sender = asyncio.create_task(self._send_input(ctx, text))
        try:
            while not isinstance(msg := await ctx.receive(self._conn_options.timeout if sender.done() else None),
                                 (p.Done, p.Cancelled)):
                if isinstance(msg, p.Audio):
                    output_emitter.push(msg.data)
                elif isinstance(msg, p.Words):
                    output_emitter.push_timed_transcript(timed(text, msg))
                elif p.ends_context(msg):
                    raise GatewayError(msg.code, msg.message, msg.retryable)
                elif isinstance(msg, p.Error):                 # alignment_unavailable: the audio goes on, untimed
                    log.warning("context %s: %s: %s", ctx.id, msg.code, msg.message)
            if rest := text.rest():                                    # after the last word: punctuation, spaces
                output_emitter.push_timed_transcript(TimedString(rest[0], start_time=rest[1], end_time=rest[1]))
        except GatewayError as exc:
            raise api_error(exc) from None
        finally:
            sender.cancel()
            ctx.cancel()
            await utils.aio.cancel_and_wait(sender)

    async def _send_input(self, ctx: Context, text: WordPieces) -> None:
        try:
            async for data in self._input_ch:
                if isinstance(data, self._FlushSentinel):
                    await ctx.flush()
                    continue
                self._mark_started()
                text.text += data
                await ctx.text(data)
            await ctx.end()
        except GatewayError:
            pass
