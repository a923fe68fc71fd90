"""A context's word timestamps: the aligner's LiveWords, sending `words` events as words settle and one
`alignment_unavailable` error (which does not end the context) if the aligner fails or stalls."""
import logging

from aligner import LiveWords

from . import protocol as p

log = logging.getLogger("qwen_tts_gateway")


def context_words(ctx, service, timeout: float) -> LiveWords:
    async def send_words(words) -> None:
        await ctx.session.send_event(ctx, p.Words(ctx.id, [w.word for w in words], [round(w.start, 3) for w in words],
                                                  [round(w.end, 3) for w in words], [w.char_start for w in words],
                                                  [w.char_end for w in words]))

    async def unavailable(reason: str) -> None:
        log.warning("context %s: word alignment unavailable (%s)", ctx.id, reason)
        await ctx.session.send_event(ctx, p.Error(p.ALIGNMENT_UNAVAILABLE, f"word timestamps are unavailable for this "
                                                  f"context ({reason}); its audio continues", False, ctx.id))

    return LiveWords(service, ctx.settings.language or "auto", timeout, on_words=send_words, on_failure=unavailable)
