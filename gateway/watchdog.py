"""A socket's timers, checked about once a second: context timeout, idle release, a client too far behind."""
from qwen_tts_client import protocol as p


async def watch(session) -> None:
    cfg, clock = session.gateway.config, session.gateway.clock
    timeout, release, behind = cfg.context_timeout, cfg.limits.idle_release, cfg.limits.max_outbound_seconds
    while True:
        await clock.sleep(min(1.0, timeout / 4, release / 4, behind / 4))
        now = clock.monotonic()
        for ctx in list(session.contexts.values()):
            if ctx.idle_seconds(now) > timeout:
                session.fail(ctx, p.CONTEXT_TIMEOUT, f"no message for this context in {timeout:g} s")
            else:
                ctx.release_if_idle(now, release)
        if session.outbox.too_slow(now):
            session.drop_slow_consumer()
