"""The aligner asks for its turn before it cuts a batch: the jobs that come while it waits for the turn join that
turn's batch, not the one after; a turn too small for the batch's first slice goes back unused, and the batch waits for
a turn that holds it; the engine never waits for a batch's host work past a turn's spare time, nor for an aligner that
takes no turns."""
import contextlib
import threading
import time

import pytest

from aligner import AlignmentService
from engine.core.side_work import SideWork
from stand_in_aligner import StandIn
from tests.test_aligner_isolation import job
from tests.test_aligner_pipeline import until


class Turned:
    """One slice a batch, taken in the turns the service gives after `prep_s` of host work; records each batch's
    first units."""
    slices = 1

    def __init__(self, prep_s: float = 0.0, launch_s: float = 0.0):
        self.batches, self.prep_s, self.launch_s = [], prep_s, launch_s

    def launch_units(self, items, rate, turn):
        time.sleep(self.prep_s)
        with turn([1.0]) as (count, now):
            self.batches.append([units[0] for _, units in items])
            time.sleep(self.launch_s)                         # its kernels' launches, within the turn
            now.end()
        return [[(0.0, 0.1)] * len(units) for _, units in items]

    def finish(self, launched):
        return launched


def grant(gate: SideWork, budget_s: float = float("inf"), after=None) -> None:
    """A turn as the engine gives one after a step (`after`: the step's end), once the aligner asks."""
    assert until(lambda: gate.wanted is not None)
    gate.give(after, budget_s=budget_s)


@contextlib.contextmanager
def serving(aligner, timeout_s: float = 5.0):
    """A service whose turns the test gives as the engine would: (the gate, the service)."""
    gate = SideWork(timeout_s=timeout_s)
    service = AlignmentService(aligner, side_work=gate, gather=0).start()
    try:
        yield gate, service
    finally:
        gate.idle()
        service.close()


@pytest.fixture
def served():
    with serving(aligner := Turned()) as (gate, service):
        yield gate, aligner, service


def test_a_job_that_comes_while_the_aligner_waits_for_its_turn_joins_that_turn(served):
    gate, aligner, service = served
    first = service.submit(*job(1, "first"))
    assert until(lambda: gate.wanted is not None)            # asked, priced at the job alone, nothing cut yet
    second = service.submit(*job(1, "second"))
    grant(gate)
    assert first.result(5) and second.result(5)
    assert aligner.batches == [["first", "second"]] and service.stats["turns"] == 1
    assert service.stats["turns_returned"] == 0


def test_a_turn_too_small_for_the_first_slice_goes_back_and_the_batch_waits_for_the_next(served):
    gate, aligner, service = served
    service.costs.per_gflop_s = 0.01                          # the batch's slice: 10.5 ms, above a 5 ms turn
    asked = service.submit(*job(1, "one"))
    grant(gate, 0.005)
    assert until(lambda: service.stats["turns_returned"] == 1) and not aligner.batches
    threading.Thread(target=grant, args=(gate, 0.05), daemon=True).start()
    assert asked.result(5) and aligner.batches == [["one"]] and service.stats["turns"] == 1


def test_an_abandoned_batch_gives_its_asked_turn_back(served):
    gate, aligner, service = served
    abandoned = service.submit(*job(1, "gone"))
    assert until(lambda: gate.wanted is not None)
    abandoned.cancel()
    started = time.monotonic()
    grant(gate)                                               # the engine's wait ends with the turn, unused
    assert time.monotonic() - started < 2
    assert until(lambda: service.stats["turns_returned"] == 1) and not aligner.batches


def engine_step(gate: SideWork) -> float:
    """A step's turn as the engine thread takes it (offer's spare time at its least, then close()): its seconds."""
    t0 = time.monotonic()
    if gate.wanted is not None:
        gate.give(None, 0.01, 1.0)
    gate.close()
    return time.monotonic() - t0


def test_the_engine_waits_for_a_batchs_host_work_no_longer_than_the_spare_time():
    with serving(aligner := Turned(prep_s=0.3), timeout_s=2.0) as (gate, service):
        done = service.submit(*job(1, "slow"))
        assert until(lambda: gate.wanted is not None)
        assert engine_step(gate) < 0.15                       # withdrawn: the batch takes a later turn
        assert gate.stats["withdrawn"] == 1
        threading.Thread(target=grant, args=(gate,), daemon=True).start()
        assert done.result(5) and aligner.batches == [["slow"]] and service.stats["turns_returned"] == 1


def test_an_aligner_that_takes_no_turns_is_never_given_one():
    aligner = StandIn()
    with serving(aligner, timeout_s=2.0) as (gate, service):
        try:
            service.submit(*job(1, "slow"))
            assert aligner.stalled.wait(5)
            assert max(engine_step(gate) for _ in range(20)) < 0.05 and gate.stats["given"] == 0
        finally:
            aligner.release.set()


def test_the_hosts_time_within_a_turn_is_counted():
    with serving(Turned(launch_s=0.05)) as (gate, service):
        done = service.submit(*job(1, "one"))
        grant(gate)
        assert done.result(5) and 0.05 <= service.stats["turn_host_seconds"] < 1.0
