"""The engine thread hands its deliveries over (`Engine.on_delivered`) before anything it may wait on: the next drain
of an idle engine, an aligner's turn. A chunk held across either would reach its listener a turn or half a second
late."""
import threading
import time

from engine import Engine, SynthesisRequest
from fake_clock import FakeClock

TURN_S = 0.5


def test_no_delivery_waits_for_a_turn_or_an_idle_drain():
    clock = FakeClock()
    clock.now = 100.0
    engine = Engine.load(dummy="tiny", device="cpu", max_active=4, clock=clock)
    pending, held = [], []

    def delivered():
        now = time.monotonic()
        held.extend(now - t for t in pending)
        pending.clear()

    class Handle:
        def deliver(self, item):
            pending.append(time.monotonic())

    engine.on_delivered(delivered)
    stop = threading.Event()

    def aligner():                             # turns as long as a slow forward's, wanted all the time
        while not stop.is_set():
            with engine.side_work.turn(0.001) as turn:
                time.sleep(TURN_S)
                turn.end()
    side = threading.Thread(target=aligner, daemon=True)
    side.start()
    engine.start()
    try:
        request = engine.validator.prepare(SynthesisRequest(text="Hello there, a short sentence and a few words more.",
                                                            max_frames=40, ignore_eos=True))
        engine.apply([engine.sequence(7, request, Handle())])
        deadline = time.monotonic() + 60
        while len(held) < 2 or pending or engine.num_active:
            assert time.monotonic() < deadline, (len(held), len(pending))
            time.sleep(0.05)
    finally:
        stop.set()
        engine.shutdown()
    assert held and max(held) < TURN_S * 0.8, sorted(held)[-3:]
