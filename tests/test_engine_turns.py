"""Turns for side work between the engine's steps: at once while the engine is idle; after a step only
when every generating stream has the turn's cost of audio ahead of its listener; the engine never steps during a
turn, and a turn stuck on the host holds it back at most the gate's timeout."""
import threading
import time

import pytest

from engine import SamplingParams, SynthesisRequest
from engine.core.side_work import SideWork


def test_an_idle_engines_gate_is_open_and_close_waits_for_the_turn():
    gate = SideWork(timeout_s=60)
    gate.idle()
    closer = threading.Thread(target=gate.close)
    with gate.turn(1.0) as turn:
        assert not turn.given and turn.after is None
        closer.start()
        closer.join(0.1)
        assert closer.is_alive()                         # close() waits for the turn under way
    closer.join(30)
    assert not closer.is_alive() and gate.stats["idle"] == 1


def test_a_busy_engine_gives_a_turn_to_a_waiting_caller_and_waits_only_for_its_launch():
    gate = SideWork(timeout_s=60)
    assert gate.give("step") is None                     # no one waits: no turn
    seen, read = [], threading.Event()

    def side():
        with gate.turn(0.01) as turn:
            seen.append((turn.given, turn.after))
            time.sleep(0.1)
            seen.append("queued")
            turn.end("queued")
            read.wait(30)                                # reading results: the engine is not held back
            seen.append("read")
    thread = threading.Thread(target=side)
    thread.start()
    while gate.wanted is None:
        time.sleep(0.001)
    assert gate.give("step") == "queued"
    assert seen == [(True, "step"), "queued"]            # it waited for the launch, not for the reading
    read.set()
    thread.join()
    assert gate.stats["given"] == 1


def test_a_turn_stuck_on_the_host_holds_the_engine_back_at_most_the_timeout():
    gate, release = SideWork(timeout_s=0.2), threading.Event()

    def side():
        with gate.turn(0.01):
            release.wait(60)
    thread = threading.Thread(target=side)
    thread.start()
    while gate.wanted is None:
        time.sleep(0.001)
    assert gate.give("step") is None                     # back while the turn is still stuck
    assert gate.stats["late"] == 1 and thread.is_alive()
    for _ in range(3):                                   # and no later step waits for it again
        assert gate.close() is None
    assert gate.stats["late"] == 1 and gate.stats["engine_wait_s"] < 0.4 and thread.is_alive()
    release.set()
    thread.join()


@pytest.mark.slow
def test_turns_come_only_from_the_listeners_slack_and_never_beside_a_step(engine):
    """A side worker asks for 0.3 s turns all through a stream; the engine gives them only when the stream has that
    (and a few steps) ahead of a real-time listener, does not step during one, and the listener never runs dry."""
    stop, turns = threading.Event(), []

    def side():
        while not stop.is_set():
            with engine.side_work.turn(0.3) as turn:
                steps, slack = engine.step.steps, engine.scheduler.slack_s(engine.clock.monotonic())
                time.sleep(0.3)
                turns.append((turn.given, slack, engine.step.steps - steps))
    request = SynthesisRequest(text="A long enough sentence to be spoken for a while.", max_frames=120,
                               ignore_eos=True, sampling=SamplingParams(seed=1))
    handle = engine.submit(request)
    worker = threading.Thread(target=side)
    worker.start()
    try:
        arrivals = [(engine.clock.monotonic(), len(c.pcm)) for c in handle.iter_blocking()]
    finally:
        stop.set()
        worker.join(5)
    given = [t for t in turns if t[0]]
    assert given, "no turn was given while the stream generated"
    assert all(slack >= 0.3 for _, slack, _ in given)
    assert all(steps == 0 for *_, steps in turns)
    start, played = arrivals[0][0], 0.0                  # a player started at the first chunk never waits
    for t, samples in arrivals:
        assert t - start <= played + 1e-3
        played += samples / 24000


def test_without_side_work_the_engine_plans_no_turns(engine, monkeypatch):
    """No one takes turns (no aligner): the engine does not walk its streams for a turn's slack after each step."""
    planned = []
    monkeypatch.setattr(engine.side_work, "attached", False)
    monkeypatch.setattr(engine.side_work, "planned", lambda *a: planned.append(a) or 0.0)
    request = SynthesisRequest(text="Nothing beside this stream.", max_frames=8, ignore_eos=True,
                               sampling=SamplingParams(seed=1))
    assert sum(len(c.pcm) for c in engine.submit(request).iter_blocking()) > 0
    assert planned == [] and not engine.side_work.attached
    monkeypatch.setattr(engine.side_work, "attached", True)            # a turn taker: a plan after every step
    assert sum(len(c.pcm) for c in engine.submit(request).iter_blocking()) > 0
    assert len(planned) >= 8
