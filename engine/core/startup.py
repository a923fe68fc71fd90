"""Start-up phases, one log line each (`start-up: NAME 12.3 s`), as bench/startup_bench.py reads them."""
import logging
import sys
import time
from contextlib import contextmanager

log = logging.getLogger("qwen_tts_engine")
PREFIX = "start-up:"


def report(name: str, seconds: float, detail: str = "") -> None:
    log.info("%s %s %.1f s%s", PREFIX, name, seconds, f" ({detail})" if detail else "")


@contextmanager
def phase(name: str):
    t0 = time.perf_counter()
    yield
    torch = sys.modules.get("torch")        # a front end reports without importing it
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()            # the phase's queued device work is its own, not the next one's
    report(name, time.perf_counter() - t0)


def report_compiles() -> None:
    """torch.compile's share of the phases before (first calls compile; a cache hit skips inductor's codegen)."""
    from torch._dynamo.utils import compilation_time_metrics, counters
    graphs = counters["stats"]["unique_graphs"]
    if graphs:
        hits, misses = counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"]
        report("torch.compile, within the phases above", sum(compilation_time_metrics["_compile.compile_inner"]),
               f"{graphs} graphs; FX graph cache {hits} hits, {misses} misses")
