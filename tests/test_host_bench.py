"""bench/host_bench.py at a tiny size: the engine's real path over the hollow model streams every context to its end."""
from types import SimpleNamespace

import pytest

from bench.host_bench import run_level


@pytest.mark.parametrize("ipc", [False, True])
def test_host_bench_streams_every_context_through_and_profiles_the_engine_path(ipc):
    """`ipc`: the chunks pass a thread that pickles them for the socket on their way."""
    args = SimpleNamespace(dummy="tiny", piece=4, every_ms=15.0, step_ms=60.0, max_chars=40, kv_tokens=640,
                           warmup=2, steps=60, profile=40, ipc=ipc)
    row = run_level(8, args)
    assert row["errors"] == [] and row["steps"] == 60
    assert set(row["ended"]) == {"eos"} and row["ended"]["eos"] >= 8     # spoken to the end, then replaced
    assert row["running_mean"] > 4 and row["host_ms_per_step_mean"] > 0
    assert row["wall_ms_per_step"] >= 0.9 * row["host_ms_per_step_mean"]    # a thread's CPU time fits in its wall time
    assert any("output.py" in f["where"] for f in row["profile"])


def test_the_c_library_keeps_chunk_memory_on_the_heap():
    from engine.core.host_heap import keep_heap
    assert keep_heap()            # glibc took both thresholds: chunks no longer come from fresh mmaps


@pytest.mark.slow                                   # a reader process
def test_relay_bench_carries_every_chunk_to_a_reader_and_times_both_parts():
    from bench.relay_bench import run
    arrival, joined, host = run(16, 40.0, 20)
    assert len(arrival) == len(joined) >= 16 * 5                  # several chunks a stream
    assert len(host) == 20 and all(0 < h < 0.04 for h in host)    # CPU a step, within the step's time
    assert all(0 <= j <= a < 1.0 for a, j in zip(arrival, joined))  # joined before read, read within a second
