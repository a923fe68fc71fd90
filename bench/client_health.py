"""A load client's own health over its window: CPU use and event-loop lag, so a saturated client is never mistaken
for a slow server."""
import asyncio
import time

import numpy as np

TICK_S = 0.005
SATURATED_LAG_P99_MS = 10.0
SATURATED_CPU = 0.9


async def watch_health(start: float, end: float) -> dict:
    """Ticks every 5 ms until `end` (perf_counter); the lag is how late each tick inside [start, end) wakes up."""
    while time.perf_counter() < start:
        await asyncio.sleep(min(TICK_S, start - time.perf_counter()))
    cpu0, wall0, lags = time.process_time(), time.perf_counter(), []
    while (now := time.perf_counter()) < end:
        await asyncio.sleep(TICK_S)
        lags.append(time.perf_counter() - now - TICK_S)
    lag_ms = np.array(lags or [0.0]) * 1000
    health = dict(cpu=(time.process_time() - cpu0) / max(time.perf_counter() - wall0, 1e-9),
                  lag_p50_ms=float(np.percentile(lag_ms, 50)), lag_p99_ms=float(np.percentile(lag_ms, 99)),
                  lag_max_ms=float(lag_ms.max()))
    health["saturated"] = health["lag_p99_ms"] > SATURATED_LAG_P99_MS or health["cpu"] > SATURATED_CPU
    return health
