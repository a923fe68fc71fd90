"""The side-work hook's rule: a turn after a step when the listeners' slack past the reserve, over 1.5, holds the cost
asked for, the engine readying itself (`settle`) only for a turn it gives; and the frame's planned share it learns
(on a GPU), the capacity words are admitted on."""
import threading
import time

from engine.core.side_work import SideWork


def test_a_turn_is_offered_only_from_enough_slack_and_carries_what_the_listeners_can_spare():
    side_work, settled, seen = SideWork(timeout_s=5), [], []
    budget = SideWork.budget
    assert side_work.offer(budget(10.0, 0.1), lambda: settled.append(1)) is None and not settled   # no one waits

    def side():
        with side_work.turn(0.2) as turn:
            seen.append((turn.after, turn.budget_s))
            turn.end("queued")
    thread = threading.Thread(target=side)
    thread.start()
    while side_work.wanted is None:
        time.sleep(0.001)
    assert side_work.offer(budget(0.35, 0.1), lambda: settled.append(1)) is None and not settled   # 0.167 < 0.2
    assert side_work.offer(budget(0.46, 0.1), lambda: settled.append(1) or "step") == "queued"
    thread.join(5)
    assert settled == [1] and seen[0][0] == "step" and abs(seen[0][1] - 0.24) < 1e-9


def test_the_planned_share_is_what_the_step_leaves_of_the_frame_without_the_turns_time():
    from tests.turn_sim import Mark
    side_work, seen = SideWork(timeout_s=5, frame_s=0.08), []
    assert SideWork().planned(0.01) == 0.0                    # no plan (a CPU): turns from slack and idleness only
    assert abs(side_work.planned(0.05) - 0.022) < 1e-9       # 90% of 80 ms less a 50 ms step

    def side():
        with side_work.turn(0.02) as turn:
            seen.append(turn.budget_s)
            turn.end(Mark(0.02), Mark(0.0))                   # it took 20 ms of the device
    thread = threading.Thread(target=side)
    thread.start()
    while side_work.wanted is None:
        time.sleep(0.001)
    assert side_work.give("step", 0.011, 0.022) is not None                   # a turn of the planned share
    thread.join(5)
    assert seen == [0.022]
    planned = side_work.planned(0.07 * 0.1 + 0.05 * 0.9)     # the step's average took the turn in: the plan does not
    assert abs(planned - (0.072 - (0.052 - 0.002))) < 1e-9   # (turn time averaged as the step's time is)


def test_a_stream_waiting_for_text_holds_the_turns_while_its_first_frames_wait_to_be_sent():
    from engine.api.request import SynthesisRequest
    from engine.core.scheduler import Scheduler
    from engine.core.sequence import Sequence
    from engine.models.base import AudioFormat

    audio = AudioFormat(num_codebooks=1, samples_per_frame=1920, sample_rate=24000)      # 80 ms frames
    scheduler = Scheduler(None, 4, 256, kv=None, admission=None, max_context=1024)
    playing, starting = (Sequence(i, SynthesisRequest(text_complete=False), None, 0, "", audio) for i in range(2))
    playing.playout.listener.add(10 * 24000, 100.0)                                    # 10 s sent at t=100
    scheduler.running = [playing, starting]
    assert starting.text.ready() is False
    assert abs(scheduler.slack_s(101.0) - 9.0) < 1e-9          # a stream with no audio yet and no text: not a listener
    starting.playout.unread = 1                                # its first frame in flight: it is about to play
    assert scheduler.slack_s(101.0) == 0.0
    starting.playout.unread, starting.playout.unsent = 0, [("codes", "pcm")]    # read, not sent: one frame ahead
    assert abs(scheduler.slack_s(101.0) - 0.08) < 1e-9


def test_a_stream_not_yet_heard_shortens_a_turn_and_keeps_its_first_chunk_for_after_it():
    """Streams start all the time at scale: one not heard yet does not hold the turns back (its first audio pays a
    short turn), and the send before a turn leaves its frames for the next step's first-chunk rule."""
    import numpy as np

    from engine.api.request import SynthesisRequest
    from engine.core.output import AudioOut
    from engine.core.scheduler import Scheduler
    from engine.core.sequence import Sequence
    from engine.models.base import AudioFormat
    from tests.fake_clock import FakeClock

    audio = AudioFormat(num_codebooks=1, samples_per_frame=1920, sample_rate=24000)
    scheduler = Scheduler(None, 4, 256, kv=None, admission=None, max_context=1024)
    playing, starting = (Sequence(i, SynthesisRequest(text_complete=False), None, 0, "", audio) for i in range(2))
    playing.playout.listener.add(10 * 24000, 100.0)
    starting.playout.unsent = [(np.zeros(1), np.zeros(1920, np.float32))]      # a first frame read, not sent
    scheduler.running = [playing, starting]
    assert scheduler.starting()
    assert scheduler.slack_s(101.0) == 0.08 and abs(scheduler.slack_s(101.0, listening=True) - 9.0) < 1e-9
    side_work, given = SideWork(timeout_s=5), []
    assert side_work.offer(SideWork.budget(9.0, 0.1, 0.02), lambda: given.append(1)) is None      # no one waits
    clock = FakeClock()
    clock.now = 101.0
    out = AudioOut(scheduler, audio, clock)
    out.send(9.0, heard_only=True)
    assert len(starting.playout.unsent) == 1 and not starting.playout.listener.started
    scheduler.running = [starting]
    starting.playout.unsent.append(starting.playout.unsent[0])
    starting.handle = type("Handle", (), {"deliver": lambda self, chunk: given.append(chunk)})()
    out.send(0.0, first=2)                                                        # the next step's flush
    assert starting.playout.listener.started and len(given[-1].joined().pcm) == 2 * 1920 and out.dry == 0


def test_a_turn_while_streams_start_is_at_most_the_bound_given():
    side_work, seen = SideWork(timeout_s=5), []

    def side():
        with side_work.turn(0.01) as turn:
            seen.append(turn.budget_s)
            turn.end("queued")
    thread = threading.Thread(target=side)
    thread.start()
    while side_work.wanted is None:
        time.sleep(0.001)
    assert side_work.offer(SideWork.budget(9.0, 0.1, 0.005), lambda: "step") is None      # its first slice won't fit
    assert side_work.offer(SideWork.budget(9.0, 0.1, 0.02), lambda: "step") == "queued"
    thread.join(5)
    assert seen == [0.02]


def test_the_plan_counts_only_the_turns_the_listeners_allow():
    from engine.core.turn_plan import TurnPlan
    plan = TurnPlan(0.08)
    assert abs(plan.after_step(0.04, 0.0) - 0.032) < 1e-9                  # 90% of the frame less the step
    assert abs(plan.after_step(0.04, 0.0, most_s=0.02) - 0.02) < 1e-9     # streams starting: a short turn
    turn_s, capacity = plan.turn_s, plan.capacity
    assert plan.after_step(0.04, 0.0, most_s=-0.01) == 0.0                # a listener too low for any turn
    assert plan.turn_s == turn_s and plan.capacity < capacity             # fewer turns, not smaller ones


def test_a_listener_one_step_past_its_first_chunk_leaves_room_for_a_turn():
    """A first chunk of two frames, one step played, its next frame in flight: the turn delays that frame until the
    next step's read, so the listener keeps that step and the relay; at 40 ms steps a turn fits (a reserve of three
    steps, 120 ms, had allowed none while any stream had just started)."""
    reserve, budget = SideWork(frame_s=0.08).reserve, SideWork.budget
    assert abs(budget(0.16 - 0.04, reserve(0.04), 0.02) - 0.02) < 1e-9
    assert budget(0.1, reserve(0.064), 0.032) < 0                      # a 64 ms step keeps 128 ms
    assert budget(0.08, reserve(0.02), 0.02) <= 0                       # one frame: the relay's jitter, no turn
    assert abs(SideWork().reserve(0.04) - 0.12) < 1e-9                   # a CPU's untimed turns: three steps


def test_the_capacity_words_are_admitted_on_is_the_share_over_many_steps_not_the_last():
    from engine.core.turn_plan import SPAN_S, TurnPlan
    plan = TurnPlan(0.08)
    for _ in range(400):                                                # 40 ms steps, 20 ms turns
        plan.after_step(0.04, 0.0, most_s=0.02)
    share = plan.capacity
    assert abs(share - 0.02 / 0.06) < 1e-3
    plan.after_step(0.04, 0.0, most_s=-0.01)                            # a stream just heard: no turn this step
    assert plan.capacity > 0.9 * share
    for _ in range(round(SPAN_S / 0.04)):                                # none for SPAN_S
        plan.after_step(0.04, 0.0, most_s=-0.01)
    assert plan.capacity < 0.5 * share


def test_turns_never_take_the_step_time_admission_keeps_for_streams():
    """A 60 ms step under a 64 ms admission line leaves a turn 2 ms (half the room, the rest for streams joining),
    whatever the listeners could spare: words wait for turns rather than streams for a slot. Without a line the
    listeners' slack alone bounds it."""
    from types import SimpleNamespace

    from engine.core.engine_thread import EngineThread
    from engine.core.turn_plan import TurnPlan

    def budget_given(line_ms):
        seen = []
        scheduler = SimpleNamespace(slack_s=lambda now, listening: 9.0, starting=lambda: False,
                                    admission=SimpleNamespace(max_step_ms=line_ms))
        side_work = SimpleNamespace(plan=TurnPlan(0.08), wanted=None, planned=lambda step_s, b: seen.append(b),
                                    reserve=SideWork(frame_s=0.08).reserve)
        thread = EngineThread(None, scheduler, None, SimpleNamespace(step_s=0.06), None, side_work,
                              SimpleNamespace(monotonic=lambda: 0.0))
        thread._offer_turn()
        return seen[0]
    assert abs(budget_given(64.0) - 0.002) < 1e-9
    assert budget_given(None) > 1.0


def test_a_turn_whose_work_has_not_begun_is_withdrawn_when_the_engine_steps_again():
    side_work, begun = SideWork(timeout_s=5), []
    side_work.idle()                                          # the engine idle: a turn is had at once

    def side():
        with side_work.turn(0.01, begun=False) as turn:
            time.sleep(0.3)                                   # the holder's host work before its kernels
            begun.append(side_work.begin(turn))
    thread = threading.Thread(target=side)
    thread.start()
    while side_work._current is None:
        time.sleep(0.001)
    started = time.monotonic()
    assert side_work.close() is None and time.monotonic() - started < 0.1     # a step is not held back by it
    thread.join(5)
    assert begun == [False] and side_work.stats["withdrawn"] == 1
