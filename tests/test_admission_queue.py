"""A burst is queued, not refused: contexts without room wait in order while the scheduler expects room within
--max-queue-ms, at the times the test gives; `busy` stays immediate where the server is full."""
from types import SimpleNamespace

import numpy as np
import pytest

from engine import EngineInputError, SynthesisRequest
from engine.core.admission import Admission
from engine.models.base import AudioFormat
from engine.core.scheduler import Scheduler
from engine.core.sequence import Sequence, Status
from engine.core import step_cost
from engine.core.step_cost import FIT_STEPS, StepCost

VOICE = SimpleNamespace(key="voice", length=16)
MODEL = SimpleNamespace(audio=AudioFormat(num_codebooks=1, samples_per_frame=4, sample_rate=50), eos=-1)


def scheduler(max_active=2, kv_tokens=100_000, max_step_ms=None, max_queue_s=0.5, cost=None) -> Scheduler:
    admission = Admission(max_active, kv_tokens, 16, prompt_tokens=lambda seq, text_ids: 16 + text_ids,
                          max_step_ms=max_step_ms, cost=cost)
    return Scheduler(MODEL, max_active, 256, SimpleNamespace(release=lambda seq: None), admission, 4096, max_queue_s)


def seq(i: int, max_frames: int | None = 10, closed: bool = True) -> Sequence:
    s = Sequence(i, SynthesisRequest(text="Hello there", max_frames=max_frames, text_complete=closed),
                 SimpleNamespace(deliver=lambda item: None), 0, "", MODEL.audio)
    s.prefix = VOICE
    return s


def start(sched: Scheduler, *seqs: Sequence) -> None:
    """What the step's admit does to a waiting stream, less the model."""
    for s in seqs:
        sched.waiting.remove(s)
        s.status, s.slot = Status.RUNNING, sched.free_slots.popleft()
        sched.running.append(s)


def test_a_burst_beyond_the_slots_is_queued_and_joins_in_order_as_streams_end():
    sched = scheduler()
    a, b, c, d, e = (seq(i) for i in range(5))
    sched.add(a, 40.0, now=0.0), sched.add(b, 40.0, now=0.0)
    start(sched, a, b)
    sched.add(c, 40.0, now=0.0)            # a's 10 frames left at 40 ms a step: room in 400 ms
    sched.add(d, 40.0, now=0.01)           # b's
    with pytest.raises(EngineInputError, match="2 streams are generating.*room expected in inf") as err:
        sched.add(e, 40.0, now=0.02)       # no third end is known: refused at once, not queued
    assert err.value.code == "busy" and sched.queue.seqs() == [c, d]
    a.frames = 8
    assert sched.admit_queued(40.0, now=0.1) == [] and len(sched.queue) == 2       # no slot yet
    sched.finish(a, "eos")
    assert sched.admit_queued(40.0, now=0.2) == [] and list(sched.waiting) == [c]   # one slot: the oldest
    sched.finish(b, "eos")
    assert sched.admit_queued(40.0, now=0.3) == [] and list(sched.waiting) == [c, d]
    assert sched.admission.refused == 1 and sched.queue.queued == 2 and not sched.queue
    assert c.reserved and d.reserved and abs(sched.queue.waited_s - 0.49) < 1e-9


def test_a_new_context_queues_behind_those_waiting_even_when_a_slot_just_freed():
    sched = scheduler()
    a, b, c, d = (seq(i) for i in range(4))
    sched.add(a, 40.0, now=0.0), sched.add(b, 40.0, now=0.0)
    start(sched, a, b)
    sched.add(c, 40.0, now=0.0)
    sched.finish(a, "eos")                  # a slot is free before the queue's next turn
    sched.add(d, 40.0, now=0.1)             # d would fit, but c came first
    assert sched.queue.seqs() == [c, d] and not sched.waiting
    assert sched.admit_queued(40.0, now=0.1) == [] and list(sched.waiting) == [c] and sched.queue.seqs() == [d]


def test_a_queued_context_whose_text_outgrows_the_whole_cache_fails_alone():
    sched = scheduler(max_active=1, kv_tokens=1024)
    a, b = seq(0), seq(1, max_frames=None)
    sched.add(a, 40.0, now=0.0)
    start(sched, a)
    sched.add(b, 40.0, now=0.0)
    b.text.feed = list(range(600))               # its text kept arriving: ~1,150 KV tokens now
    sched.finish(a, "eos")
    [(failed, error)] = sched.admit_queued(40.0, now=0.1)
    assert failed is b and error.code == "text_too_long" and "whole cache holds 1024" in str(error)
    sched.finish(b, "error")
    assert not sched.queue and not sched.waiting and sched.admission.reserved == 0


def test_a_closed_text_ends_when_the_model_has_ended_texts_so_far_not_at_its_runaway_guard():
    def near_its_end(learned: bool) -> Scheduler:
        sched = scheduler(max_active=1)
        if learned:                          # the model ended a 10-id text after 20 frames
            x = seq(9, max_frames=None)
            sched.add(x, 40.0, now=0.0)
            start(sched, x)
            x.text.feed, x.frames = list(range(10)), 20
            sched.finish(x, "eos")
        a = seq(0, max_frames=None)          # 100 ids: 840 frames at most, about 200 as texts end
        sched.add(a, 40.0, now=0.0)
        start(sched, a)
        a.text.feed, a.frames = list(range(100)), 195
        sched.add(seq(1), 40.0, now=0.0)
        return sched

    assert near_its_end(learned=True).queue.queued == 1                    # 5 frames to go: 200 ms
    with pytest.raises(EngineInputError, match=r"room expected in 25800 ms"):
        near_its_end(learned=False)                                        # 645 frames to its guard


@pytest.mark.parametrize("case", ["slots_open_ended", "kv_committed", "step_running_alone"])
def test_a_full_server_answers_busy_at_once(case):
    sched = scheduler(kv_tokens=600 if case == "kv_committed" else 100_000, max_step_ms=64.0)
    running = [seq(i, max_frames=None, closed=False) for i in range(2 if case == "slots_open_ended" else 1)]
    for s in running:
        sched.add(s, 10.0, now=0.0)
    start(sched, *running)
    sched.steps, sched.started = 50, 0                            # a while since any stream started
    step_ms = 90.0 if case == "step_running_alone" else 40.0
    with pytest.raises(EngineInputError, match={"slots_open_ended": "2 streams are generating",
                                                "kv_committed": "KV cache is committed",
                                                "step_running_alone": "at capacity"}[case]) as err:
        sched.add(seq(9, max_frames=200), step_ms, now=1.0)
    assert err.value.code == "busy" and not sched.queue and sched.admission.refused == 1


def test_a_queued_context_past_the_bound_gets_busy_with_a_clear_message():
    sched = scheduler(max_active=1)
    a, b = seq(0), seq(1)
    sched.add(a, 40.0, now=0.0)
    start(sched, a)
    sched.add(b, 40.0, now=1.0)
    assert sched.admit_queued(40.0, now=1.3) == [] and sched.queue.seqs() == [b]
    [(late, error)] = sched.admit_queued(40.0, now=1.501)
    assert late is b and error.code == "busy" and "no room within 500 ms in the queue" in str(error)
    sched.finish(b, "error")                           # as the engine thread's _fail does
    assert not sched.queue and b.status is Status.FINISHED and sched.queue.expired == 1
    assert sched.admission.reserved == a.reserved + 16                     # b never held any KV


def test_a_cancel_while_queued_removes_it_and_the_next_one_takes_its_place():
    sched = scheduler(max_active=1)
    a, b, c = seq(0), seq(1), seq(2, max_frames=None)
    sched.add(a, 40.0, now=0.0)
    start(sched, a)
    sched.add(b, 40.0, now=0.0)
    reserved = sched.admission.reserved
    sched.finish(b, "cancelled")
    assert b.status is Status.FINISHED and b.finish_reason == "cancelled" and not sched.queue
    assert sched.admission.reserved == reserved
    sched.add(c, 40.0, now=0.1)
    sched.finish(a, "eos")
    assert sched.admit_queued(40.0, now=0.2) == [] and list(sched.waiting) == [c]


def test_a_step_slow_from_starting_streams_queues_and_a_step_that_started_none_admits():
    sched = scheduler(max_active=8, max_step_ms=64.0)
    a = seq(0)
    sched.add(a, 10.0, now=0.0)
    start(sched, a)
    sched.started = 40                                  # the last step started a burst's streams: 150 ms
    b = seq(1)
    sched.add(b, 150.0, now=0.0)                        # its prefill comes within a step's budget: 150 ms away
    assert sched.queue.seqs() == [b]
    assert sched.admit_queued(150.0, now=0.0) == []     # the next step starts streams again
    assert sched.queue.seqs() == [b]
    sched.started = 0
    assert sched.admit_queued(150.0, now=0.04) == []    # this one started none and took 40 ms: the batch fits
    assert list(sched.waiting) == [b] and not sched.queue


def test_a_batch_past_the_step_bound_without_starts_is_full_though_streams_start_and_idling_measures_nothing():
    sched = scheduler(max_active=8, max_step_ms=64.0)
    a = seq(0, max_frames=None, closed=False)
    sched.add(a, 10.0, now=0.0)
    start(sched, a)
    sched.admit_queued(90.0, now=0.0)
    sched.admit_queued(90.0, now=0.5, idled=True)        # the engine waited for work: no step was measured
    assert sched.calm_step_ms is None
    sched.admit_queued(90.0, now=0.59)                   # a step that started none took 90 ms
    assert sched.calm_step_ms == pytest.approx(90.0)
    sched.started = 3
    with pytest.raises(EngineInputError, match="at capacity.*room expected in inf"):
        sched.add(seq(1), 150.0, now=0.6)                # a's length is open: no end in sight
    assert not sched.queue


def test_the_step_cost_is_a_line_from_the_fastest_step_through_each_streams_cost_prefills_apart():
    cost = StepCost()
    assert cost.streams_within(64.0) == float("inf")        # nothing measured: admission goes by the average alone
    cost.observe(0.010, streams=1, started=1)
    cost.observe(0.012, streams=2, started=0)               # a few streams' steps are the floor and noise
    assert cost.floor_s == 0.010 and cost.per_stream_s is None
    cost.observe(0.140, streams=1000, started=200)          # a burst's first steps: too few to fit a line on
    assert cost.streams_within(64.0) == float("inf")
    for _ in range(FIT_STEPS - 1):                          # no starts since: the streams alone, 0.03 ms each
        cost.observe(0.040, streams=1000, started=0)
    assert cost.per_stream_s == pytest.approx(0.00003, rel=0.02)
    rng = np.random.default_rng(0)
    for _ in range(60):                                     # under churn nearly every step starts some
        streams, started = int(rng.integers(1200, 1600)), int(rng.integers(0, 40))
        cost.observe(0.010 + 0.00003 * streams + 0.0005 * started, streams, started)
    assert cost.per_stream_s == pytest.approx(0.00003)      # a start's prefill (0.5 ms) is not a stream's cost
    assert abs(cost.streams_within(64.0) - 1800) <= 1


@pytest.fixture
def few_streams(monkeypatch):
    """The line scaled to a test's handful of streams (it learns from and limits to 128 or more in the engine)."""
    monkeypatch.setattr(step_cost, "SLOPE_STREAMS", 1)


def four_streams_within_64_ms() -> StepCost:
    cost = StepCost()
    cost.observe(0.010, streams=1, started=1)
    for _ in range(FIT_STEPS + 5):                          # the first few outlast the average: stalls, skipped
        cost.observe(1.546, streams=128, started=0)         # 12 ms a stream above a 10 ms floor
    return cost


def test_a_wave_that_would_push_the_step_past_its_bound_waits_for_streams_to_end(few_streams):
    sched = scheduler(max_active=8, max_step_ms=64.0, cost=four_streams_within_64_ms())
    running = [seq(0)] + [seq(i, max_frames=100) for i in range(1, 4)]     # one ends in 400 ms, the others in 4 s
    for s in running[:3]:
        sched.add(s, 40.0, now=0.0)
    start(sched, *running[:3])
    sched.steps, sched.started = 50, 0
    sched.add(running[3], 40.0, now=0.0)                    # the fourth fits the line
    assert list(sched.waiting) == [running[3]]
    start(sched, running[3])
    late = seq(9, max_frames=100)
    sched.add(late, 40.0, now=0.0)                          # a fifth would not, though 40 ms is under the bound:
    assert sched.queue.seqs() == [late] and not sched.waiting   # queued until a stream ends (10 frames: 400 ms)
    assert sched.admit_queued(40.0, now=0.1) == [] and sched.queue.seqs() == [late]
    sched.finish(running[0], "eos")
    assert sched.admit_queued(40.0, now=0.2) == [] and list(sched.waiting) == [late]
    sched.steps += 1
    with pytest.raises(EngineInputError, match=r"at capacity \(4 streams: the measured step keeps 64 ms for 4\)"):
        sched.add(seq(10), 40.0, now=0.3)


def test_under_churn_a_step_past_its_bound_from_too_many_streams_answers_busy_not_a_prefill_wait(few_streams):
    sched = scheduler(max_active=8, max_step_ms=64.0, cost=four_streams_within_64_ms())
    running = [seq(i, max_frames=None, closed=False) for i in range(5)]
    for s in running:
        sched.waiting.append(s)
    start(sched, *running)
    sched.started = 3                                       # streams start every step: no calm step to go by
    with pytest.raises(EngineInputError, match="at capacity.*room expected in inf"):
        sched.add(seq(9), 70.0, now=0.0)
    assert not sched.queue


def test_the_line_skips_a_stall_tells_streams_from_starts_only_when_they_vary_apart_and_never_caps_below_128():
    rng = np.random.default_rng(1)
    cost = StepCost()
    cost.observe(0.010, streams=1, started=1)
    for _ in range(40):
        cost.observe(0.010 + 0.00003 * 140, streams=140, started=0)
    cost.observe(2.0, streams=140, started=0)               # a 2 s stall (a capture, a collection): not the batch's
    assert cost.per_stream_s == pytest.approx(0.00003)
    cost.per_stream_s = 0.1                                 # however wrong a line comes out, it caps no lower than
    assert cost.streams_within(64.0) == step_cost.SLOPE_STREAMS   # it can still learn from
    cost = StepCost()
    cost.observe(0.010, streams=1, started=1)
    for _ in range(200):                                    # starts always 8, streams barely move: near parallel,
        streams = int(rng.integers(1533, 1540))             # so the noise would swing a two-term fit
        cost.observe(0.010 + 0.00003 * streams + 0.0005 * 8 + rng.normal(0, 0.0005), streams, 8)
        if cost.per_stream_s is not None:                   # the streams alone carry the starts: a little high
            assert 1400 <= cost.streams_within(64.0) <= 1800


def test_a_replica_is_full_at_its_step_line_before_its_slots():
    from gateway.replicas.balance import Replica, ReplicaTable
    table = ReplicaTable(wanted=1, max_step_ms=64.0)
    replica = Replica("0", "http://10.0.0.1:8000", 1, info={})
    table.polled(replica, dict(tts_generating_requests=1500, tts_max_active=2048, tts_engine_step_ms=60.0,
                               tts_engine_step_capacity_streams=1500))
    assert replica.max_active == 1500 and replica.full(64.0)


def test_a_queue_held_for_a_second_that_let_one_wait_out_its_bound_waits_at_least_its_measured_pace():
    def queue_at_1_1_s(expire: bool):
        sched = scheduler(max_active=4, max_queue_s=0.5)
        running = [seq(i, max_frames=i + 1) for i in range(4)]     # ends 1-4 steps away: room every 40 ms
        for s in running:
            sched.add(s, 40.0, now=0.0)
        start(sched, *running)
        b, c, d, e, f = (seq(i) for i in range(4, 9))
        sched.add(b, 40.0, now=0.1), sched.add(c, 40.0, now=0.2)
        sched.finish(running[0], "eos")
        assert sched.admit_queued(40.0, now=0.5) == [] and list(sched.waiting) == [b]
        sched.add(d, 40.0, now=0.6)
        if expire:
            [(late, _)] = sched.admit_queued(40.0, now=0.75)           # c waited out the 500 ms
            sched.finish(late, "error")
        sched.add(e, 40.0, now=0.9)                                 # held 0.8 s: the projections alone
        return sched, f

    sched, f = queue_at_1_1_s(expire=True)
    with pytest.raises(EngineInputError, match="room expected in 3000 ms"):
        sched.add(f, 40.0, now=1.2)              # held 1.1 s, one expired, one joined in the last second: 3 s for 3
    with pytest.raises(EngineInputError, match="room expected in inf ms"):
        sched.add(seq(9), 40.0, now=1.6)         # none joined in the last second
    with pytest.raises(EngineInputError, match="room expected in inf ms"):
        sched.add(seq(10), 40.0, now=2.5)        # the expiry is 1.75 s old, but the pace refused since: overload holds
    for late, _ in sched.admit_queued(40.0, now=2.6):           # the queue empties: the rest waited out the bound
        sched.finish(late, "error")
    assert not sched.queue
    sched.add(seq(11), 40.0, now=2.7)            # the projections alone queue it
    with pytest.raises(EngineInputError, match="room expected in inf ms"):
        sched.add(seq(12), 40.0, now=2.8)        # but a queue refilled under overload goes on at its pace
    for s in list(sched.running):
        sched.finish(s, "eos")
    sched.add(f, 40.0, now=2.9)                  # room now is room, however slow the queue was
    assert sched.queue.seqs()[-1] is f
    sched, f = queue_at_1_1_s(expire=False)
    sched.add(f, 40.0, now=1.2)                  # none expired: a queue that drains in time keeps the projections
    assert sched.queue.seqs()[-1] is f


@pytest.mark.parametrize("full", ["slots", "step_line"])
def test_streams_past_their_projected_end_are_no_room_now_so_the_pace_refuses_under_overload(full, few_streams):
    sched = scheduler(max_active=2) if full == "slots" else \
        scheduler(max_active=8, max_step_ms=64.0, cost=four_streams_within_64_ms())     # the line keeps 4 in 64 ms
    x = seq(9, max_frames=None)                  # the model ended a 10-id text after 20 frames: 2 frames an id
    sched.add(x, 40.0, now=0.0)
    start(sched, x)
    x.text.feed, x.frames = list(range(10)), 20
    sched.finish(x, "eos")
    running = [seq(i, max_frames=None) for i in range(2 if full == "slots" else 4)]
    for s in running:
        sched.add(s, 40.0, now=0.0)
    start(sched, *running)
    sched.steps, sched.started = 50, 0
    for s in running:                            # 10 ids each: 20 frames expected, 30 made and still going
        s.text.feed, s.frames = list(range(10)), 30
    c = seq(2)
    sched.add(c, 40.0, now=0.0)                  # overdue streams: the projections alone queue it
    [(late, _)] = sched.admit_queued(40.0, now=0.6)
    assert late is c
    sched.finish(c, "error")
    d = seq(3)
    sched.add(d, 40.0, now=0.7)                  # the queue refilled within a second of the expiry goes on at its pace
    with pytest.raises(EngineInputError, match="room expected in inf ms"):
        sched.add(seq(4), 40.0, now=0.8)         # none joined in the last second: busy at once, not a 500 ms wait
    assert sched.queue.seqs() == [d]
