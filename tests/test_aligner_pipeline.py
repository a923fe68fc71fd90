"""The aligner's pipeline: the aligner thread launches the next batch while the finisher reads the previous one's
results; a failed read is halved and retried on the aligner thread until the job that fails alone is found; close()
resolves every launched batch."""
import threading
import time

import pytest

from aligner import AlignmentService
from aligner.alignment_service import AlignmentUnavailable
from tests.stand_in_aligner import StandIn
from tests.test_aligner_isolation import job


class Pipelined(StandIn):
    """The stand-in split as the real aligner is: launch_units records the batch (and the thread it ran on); finish
    blocks until `go` is set, then answers (a unit 'fail' raises there, or at launch with fail_at='launch')."""

    def __init__(self, fail_at: str = "finish"):
        super().__init__()
        self.fail_at, self.launched, self.threads, self.later_launch_s = fail_at, [], set(), 0.0
        self.reading, self.go = threading.Event(), threading.Event()

    def launch_units(self, items, sample_rate, turn=None):
        if self.launched:
            time.sleep(self.later_launch_s)                  # a launch waiting for turns while a read waits too
        self.launched.append([units[-1] for _, units in items])
        self.threads.add(threading.current_thread().name)
        if self.fail_at == "launch" and any("fail" in units for _, units in items):
            raise RuntimeError("stand-in failure")
        return items, sample_rate

    def finish(self, launched):
        self.reading.set()
        assert self.go.wait(30)
        return self.align_units(*launched)


def until(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.001)
    return condition()


def test_the_next_batch_launches_while_the_previous_ones_results_are_read():
    aligner = Pipelined()
    aligner.later_launch_s = 0.2
    started, service = time.perf_counter(), AlignmentService(aligner, gather=0).start()
    try:
        first = service.submit(*job(1, "a", "first"))
        assert aligner.reading.wait(10)                     # the finisher waits on the first batch's results
        second = service.submit(*job(1, "b", "second"))
        assert until(lambda: len(aligner.launched) == 2)    # launched meanwhile
        assert not first.done() and not second.done() and service.stats["batches"] == 0
        aligner.go.set()
        assert [first.result(10), second.result(10)] == [StandIn().align_units([job(1, *u)], 24000)[0]
                                                         for u in (("a", "first"), ("b", "second"))]
        assert until(lambda: service.stats["batches"] == 2) and service.stats["jobs"] == 2
        assert 0 < service.stats["busy_seconds"] <= time.perf_counter() - started    # the overlap counted once
    finally:
        aligner.go.set()
        service.close()
    assert aligner.threads == {"aligner"}


@pytest.mark.parametrize("fail_at", ["finish", "launch"])
def test_a_failure_at_launch_or_read_costs_only_the_failing_job_its_words(fail_at):
    jobs = [job(1 + i % 3, "word", str(i)) for i in range(9)]
    jobs[5] = job(2, "fail")
    aligner = Pipelined(fail_at)
    aligner.go.set()
    service = AlignmentService(aligner, gather=0)
    futures = [service.submit(*j) for j in jobs]
    service.start()
    try:
        got = [f.exception(30) or f.result() for f in futures]
    finally:
        service.close()
    good = [i for i in range(9) if i != 5]
    assert [got[i] for i in good] == [StandIn().align_units([jobs[i]], 24000)[0] for i in good]
    assert isinstance(got[5], AlignmentUnavailable) and "stand-in failure" in str(got[5])
    assert len(aligner.launched[0]) == 9 and ["fail"] in aligner.launched[1:]        # halved down to it
    assert aligner.threads == {"aligner"}                  # every forward launched on the one thread
    assert service.stats["failed"] == 1 and service.stats["jobs"] == 8


def test_close_reads_a_launched_batch_and_retries_its_failure_before_it_returns():
    aligner = Pipelined()
    service = AlignmentService(aligner, gather=0)
    futures = [service.submit(*job(1, "good")), service.submit(*job(1, "fail"))]
    service.start()
    assert aligner.reading.wait(10)
    closing = threading.Thread(target=service.close)
    closing.start()
    closing.join(0.05)
    assert closing.is_alive() and not any(f.done() for f in futures)     # close waits for the read
    aligner.go.set()
    closing.join(10)
    assert not closing.is_alive() and not service.thread.is_alive() and not service.finisher.thread.is_alive()
    assert futures[0].result(0) == StandIn().align_units([job(1, "good")], 24000)[0]
    assert isinstance(futures[1].exception(0), AlignmentUnavailable)


def test_close_fails_a_batch_whose_read_outlives_its_wait():
    aligner = Pipelined()
    service = AlignmentService(aligner, gather=0)
    futures = [service.submit(*job(1, "stuck")) for _ in range(2)]
    service.start()
    assert aligner.reading.wait(10)
    service.close_s = 0.05
    service.close()
    assert all("closed" in str(f.exception(0)) for f in futures)
    aligner.go.set()                                       # the late read answers futures already failed
    service.finisher.thread.join(10)
    assert not service.finisher.thread.is_alive()
