"""The admission queue under sustained overload (bench/queue_sim.py: the real scheduler on a fake clock, streams past
their projected ends by the hundreds, as random weights leave them): refused contexts hear `busy` at once, not after
waiting out --max-queue-ms, and a burst that fits joins without one."""
import numpy as np

from bench.queue_sim import Overload


def test_overload_is_refused_at_once_not_after_the_queue_bound():
    sim = Overload(2048, burst=False)
    sim.run(12.0)
    assert np.median(sim.busy_after) < 0.1 and sim.expired < 0.05 * len(sim.busy_after)
    assert sim.sched.queue.queued - sim.sched.queue.expired > 1000          # while the queue keeps admitting


def test_a_burst_that_fits_gets_no_busy():
    sim = Overload(1024, burst=True)
    sim.run(5.0)
    assert not sim.busy_after
