"""A context's word timestamps: `words` events as words settle, one `alignment_unavailable` if the aligner fails, or
one `words_refused` before any if the device has no time planned for them."""
import logging

from aligner import LiveWords
from qwen_tts_client import protocol as p

log = logging.getLogger("qwen_tts_gateway")


def context_words(ctx, service, timeout: float) -> LiveWords:
    async def send_words(words) -> None:
        spans = [ctx.text.span(w.char_start, w.char_end) for w in words]      # into the client's text
        ctx.session.send_event(ctx, p.Words(ctx.id, [ctx.text.slice(a, b) for a, b in spans],
                                            [round(w.start, 3) for w in words], [round(w.end, 3) for w in words],
                                            [a for a, _ in spans], [b for _, b in spans]))

    async def unavailable(reason: str) -> None:
        if ctx.cancelling:                   # its audio has stopped: its answer holds the words known
            return
        log.warning("context %s: word alignment unavailable (%s)", ctx.id, reason)
        ctx.session.send_event(ctx, p.Error(p.ALIGNMENT_UNAVAILABLE, f"word timestamps are unavailable for this "
                                                  f"context ({reason}); its audio continues", False, ctx.id))

    async def refused(reason: str) -> None:
        log.info("context %s: word timestamps refused (%s)", ctx.id, reason)
        ctx.session.send_event(ctx, p.Error(p.WORDS_REFUSED, f"word timestamps are refused for this context "
                                                  f"({reason}); its audio continues", False, ctx.id))

    return LiveWords(service, ctx.settings.language or "auto", timeout, ctx.clock, on_words=send_words,
                     on_failure=unavailable, on_refused=refused, rate=ctx.session.gateway.engine.info["sample_rate"])


def cancelled(ctx, played_ms: float | None) -> p.Cancelled:
    played_ms = played_ms if played_ms is not None else ctx.ms(ctx.samples_sent)
    msg = p.Cancelled(ctx.id, played_ms, ctx.ms(ctx.samples_generated, ctx.session.gateway.engine.info["sample_rate"]))
    until = 0 if played_ms == 0 else ctx.words.spoken_until(played_ms) if ctx.words else None
    if until is not None:
        text, until = ctx.text.whole(), ctx.text.until(until)
        msg.spoken_text, msg.spoken_until_char, msg.unspoken_text = text[:until], until, text[until:]
    return msg
