"""The aligner's fault isolation and serving order: a failed batch is halved until the job that fails alone is found
(only it loses its words, with the reason); the most urgent jobs go first."""
import time

import numpy as np

from aligner import AlignmentService
from aligner.alignment_service import AlignmentUnavailable
from tests.stand_in_aligner import StandIn


def job(seconds: float, *units: str):
    return np.zeros(int(seconds * 24000), np.float32), list(units or ("one", "two"))


class Recording(StandIn):
    """The stand-in (a unit 'fail' makes its batch raise), recording each batch's size; `limit`: a batch of more
    jobs fails as a whole (as the 48/49-row mismatch did)."""

    def __init__(self, limit: int | None = None):
        super().__init__()
        self.limit, self.batches = limit, []

    def align_units(self, items, sample_rate, turn=None):
        self.batches.append(len(items))
        if self.limit is not None and len(items) > self.limit:
            raise RuntimeError("The size of tensor a (48) must match the size of tensor b (49)")
        return super().align_units(items, sample_rate, turn)


def run(aligner, jobs: list, due=None) -> list:
    service = AlignmentService(aligner, gather=0)
    futures = [service.submit(*j, due) for j in jobs]
    service.start()
    try:
        return [f.exception(30) or f.result() for f in futures]
    finally:
        service.close()


def test_one_bad_job_among_good_ones_loses_only_its_words(caplog):
    jobs = [job(1 + i % 3, "word", str(i)) for i in range(9)]
    jobs[5] = job(2, "fail")
    aligner = Recording()
    got = run(aligner, jobs)
    good = [i for i in range(9) if i != 5]
    assert [got[i] for i in good] == [StandIn().align_units([jobs[i]], 24000)[0] for i in good]
    assert isinstance(got[5], AlignmentUnavailable) and "stand-in failure" in str(got[5])
    assert aligner.batches[0] == 9 and aligner.batches.count(1) >= 1 and len(aligner.batches) <= 2 * 9


def test_a_batch_level_failure_costs_no_job_its_words():
    jobs = [job(0.5 + i % 4, "a", "b", "c") for i in range(13)]
    aligner = Recording(limit=4)
    got = run(aligner, jobs)
    assert got == [StandIn().align_units([j], 24000)[0] for j in jobs]
    assert aligner.batches == [13, 6, 3, 3, 7, 3, 4]            # halved until each half fits


def test_every_job_failing_alone_gets_the_reason_once_each():
    aligner = Recording()
    got = run(aligner, [job(1, "fail")] * 3)
    assert all(isinstance(g, AlignmentUnavailable) and str(g).startswith("alignment failed: RuntimeError")
               for g in got)


def test_the_most_urgent_jobs_go_first_and_the_rest_lead_the_next_batch():
    """Queued while the worker was busy: the batch takes the earliest due times within its audio bound."""
    order = []

    class Recorder:
        def align_units(self, items, rate, turn=None):
            order.append([units[0] for _, units in items])
            return [[(0.0, 0.1)] * len(units) for _, units in items]

    service = AlignmentService(Recorder(), max_batch=3, max_batch_seconds=60.0, gather=0)
    now = time.monotonic()
    dues = {"late": now + 50, "soon": now + 1, "now": now - 1, "later": now + 20, "next": now + 5}
    futures = [service.submit(*job(1, name), due) for name, due in dues.items()]
    service.start()
    try:
        assert all(f.result(30) for f in futures)
    finally:
        service.close()
    assert order == [["now", "soon", "next"], ["later", "late"]]


def test_the_queue_bound_counts_the_jobs_waiting_by_due_time():
    service = AlignmentService(StandIn(), max_queue=3)
    futures = [service.submit(*job(1)) for _ in range(4)]
    assert service.queued == 3 and isinstance(futures[-1].exception(0), AlignmentUnavailable)


def test_a_batch_retried_in_halves_counts_its_jobs_wait_once():
    from fake_clock import FakeClock
    clock, aligner = FakeClock(), Recording(limit=2)
    service = AlignmentService(aligner, gather=0, clock=clock)
    futures = [service.submit(*job(1, "a"), None) for _ in range(5)]
    clock.advance(2.0)                                       # each job waits 2 s for the worker, then never again
    service.start()
    try:
        assert all(f.result(30) for f in futures)
    finally:
        service.close()
    assert aligner.batches == [5, 2, 3, 1, 2] and service.stats["split"] == 2
    assert service.stats["queued_seconds"] == 5 * 2.0


def test_only_words_that_waited_behind_other_work_count_as_the_aligner_being_behind():
    """An utterance's opening window is due as its audio starts playing, so its words come late however idle the
    aligner is: that lateness must not refuse new contexts words; a late job that waited behind other work does,
    in whichever place of its batch, and so do the halves of a failed batch, retried after it."""
    from concurrent.futures import Future

    from fake_clock import FakeClock

    class Slow(Recording):
        def __init__(self, forward_s: float, limit: int | None = None):
            super().__init__(limit)
            self.forward_s = forward_s

        def align_units(self, items, sample_rate, turn=None):
            clock.advance(self.forward_s)                  # the forward, on the fake clock
            return super().align_units(items, sample_rate, turn)

    def submitted(due_in: float):
        item = (*job(0.64), Future(), clock.monotonic() + due_in, clock.monotonic())
        item[2].set_running_or_notify_cancel()
        return item

    clock = FakeClock()
    service = AlignmentService(Slow(0.3), gather=0, clock=clock)
    opening = submitted(0.0)                               # due as it is submitted
    clock.advance(0.05)
    service._isolated([opening])
    assert service.late_s == float("-inf")                 # 0.35 s after its due, yet it never waited
    for first_waited in (True, False):                     # one job waited behind another batch, one did not
        waited, fresh = submitted(0.2), None
        clock.advance(0.8)
        fresh = submitted(5.0)
        service._isolated([waited, fresh] if first_waited else [fresh, waited])
        assert -1.0 < service.late_s < 1.0 and "behind" in service.admission.admit(0.0, 1.0, service.late_s)
    service = AlignmentService(Slow(2.0, limit=1), gather=0, clock=clock)    # a batch fails after 2 s, halves pass
    pair = [submitted(0.3), submitted(0.3)]
    clock.advance(0.1)
    service._isolated(pair)
    assert service.aligner.batches == [2, 1, 1] and service.late_s > 0      # the halves waited behind the failure


def test_spans_past_their_windows_audio_are_counted():
    """A random-weight aligner's argmax lands past the audio: such words settle only with an utterance's last job."""
    class PastTheEnd(StandIn):
        def align_units(self, items, sample_rate, turn=None):
            return [[(a, 99.0 if u == "past" else b) for u, (a, b) in zip(units, spans)]
                    for (_, units), spans in zip(items, super().align_units(items, sample_rate, turn))]
    service = AlignmentService(PastTheEnd(), gather=0)
    futures = [service.submit(*j, None) for j in (job(1, "a", "past"), job(2, "past", "past", "b"))]
    service.start()
    try:
        assert [len(f.result(30)) for f in futures] == [2, 3]
    finally:
        service.close()
    assert (service.stats["spans"], service.stats["spans_past_audio"]) == (5, 3)
