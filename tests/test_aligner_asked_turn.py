"""The aligner asks for its turn before it cuts a batch: the jobs that come while it waits for the turn join that
turn's batch, not the one after; a turn too small for the batch's first slice goes back unused, and the batch waits for
a turn that holds it."""
import threading
import time

import pytest

from aligner import AlignmentService
from engine.core.side_work import SideWork
from tests.test_aligner_isolation import job
from tests.test_aligner_pipeline import until


class Turned:
    """One slice of `cost_s` a batch, taken in the turns the service gives; records each batch's first units."""
    slices = 1

    def __init__(self):
        self.batches = []

    def align_units(self, items, rate, turn):
        with turn([1.0]) as (count, now):
            self.batches.append([units[0] for _, units in items])
            now.end()
        return [[(0.0, 0.1)] * len(units) for _, units in items]


def grant(gate: SideWork, budget_s: float = float("inf")) -> None:
    """A turn as the engine gives one after a step, once the aligner asks."""
    assert until(lambda: gate.wanted is not None)
    gate.give(None, budget_s=budget_s)


@pytest.fixture
def served():
    """A service whose turns the test gives as the engine would: (the gate, the aligner, the service)."""
    gate, aligner = SideWork(timeout_s=5.0), Turned()
    service = AlignmentService(aligner, side_work=gate, gather=0).start()
    yield gate, aligner, service
    gate.idle()
    service.close()


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
