"""The admission queue in a running engine on a clock the test moves: a burst beyond its slots joins in order as room
appears, a queued context's text settles once it joins (not each step while it waits), and one past the bound gets
`busy`, never a hang."""
import time

import pytest

from engine import Engine, EngineInputError, SynthesisRequest
from fake_clock import FakeClock


def run_until(predicate, engine, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline and engine.thread.is_alive(), "the engine did not get there"
        time.sleep(0.005)


def test_an_engine_queues_a_burst_its_text_settles_as_it_joins_and_a_queued_one_past_the_bound_gets_busy():
    clock = FakeClock()
    engine = Engine.load(dummy="tiny", device="cpu", max_active=2, max_queue_ms=60_000, clock=clock).start()
    try:
        firsts, ends = [], []

        class Sink:                     # takes the chunks on the engine thread, as the engine core's delivery does
            def __init__(self, request_id: int):
                self.id = request_id

            def deliver(self, item) -> None:
                if getattr(item, "frame_offset", 1) == 0:
                    firsts.append(self.id)
                if isinstance(item, Exception) or item.final:
                    ends.append(item)

        requests = [SynthesisRequest(text=f"Hello number {i}.", max_frames=3, ignore_eos=True) for i in range(3)]
        requests.append(SynthesisRequest(text="Still", text_complete=False, max_frames=3))
        engine.apply([engine.sequence(1000 + i, engine.validator.prepare(r), Sink(1000 + i))
                      for i, r in enumerate(requests)])
        engine.append_text(1003, " coming in.")
        run_until(lambda: len(firsts) >= 3, engine)
        assert firsts[:3] == [1000, 1001, 1002]                  # the third joined from the queue, as room appeared
        engine.close_text(1003)
        run_until(lambda: len(ends) == 4, engine)
        assert firsts == [1000, 1001, 1002, 1003] and all(c.final and c.frame_offset for c in ends)
        assert engine.scheduler.admission.refused == 0 and engine.stats()["queued_total"] == 2

        held = engine.submit(SynthesisRequest(text="Holding a slot.", text_complete=False, max_frames=50))
        other = engine.submit(SynthesisRequest(text="Me too.", text_complete=False, max_frames=50))
        waiting = engine.submit(SynthesisRequest(text="Let me in", text_complete=False, max_frames=3))
        engine.append_text(waiting.id, " please.")
        run_until(lambda: len(engine.scheduler.queue) == 1 and
                  "".join(engine.scheduler.queue.seqs()[0].text.unsettled).endswith(" please."), engine)
        time.sleep(0.3)                                          # the engine loop drains on: its text waits to join
        assert engine.scheduler.queue.seqs()[0].text.num_text_ids == 0
        clock.advance(61)
        with pytest.raises(EngineInputError, match="no room within 60000 ms in the queue") as err:
            list(waiting.iter_blocking())
        assert err.value.code == "busy" and engine.stats()["queue_expired"] == 1 and not engine.scheduler.queue
        engine.cancel(held.id), engine.cancel(other.id)
    finally:
        engine.shutdown()


def test_the_engine_counts_each_first_chunk_with_its_wait_for_a_slot_and_from_the_slot():
    clock = FakeClock()
    engine = Engine.load(dummy="tiny", device="cpu", max_active=1, max_queue_ms=60_000, clock=clock).start()
    try:
        held = engine.submit(SynthesisRequest(text="Holding a slot.", text_complete=False, max_frames=20))
        queued = engine.submit(SynthesisRequest(text="Let me in.", max_frames=3, ignore_eos=True))
        run_until(lambda: engine.stats()["first_chunks"] == 1 and len(engine.scheduler.queue) == 1, engine)
        clock.advance(2.5)                      # the queued one waits this long for the slot, in the engine's time
        engine.close_text(held.id)
        for handle in (held, queued):
            list(handle.iter_blocking())
        stats = engine.stats()
        assert stats["first_chunks"] == 2 and stats["to_slot_s"] == 2.5 and stats["to_first_chunk_s"] == 0.0
    finally:
        engine.shutdown()
