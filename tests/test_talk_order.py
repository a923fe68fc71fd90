"""The step's talk read at the next loop's top (a large batch): its frames reach listeners no later than when read at
once, the step's cost counts the device wait, and a stream whose frames are done frees its KV blocks before another is
ended for want of one."""
import queue
import time
from types import SimpleNamespace

from engine import Engine, SynthesisRequest
from engine.core import transfer
from engine.core.plan import Plan
from engine.core.scheduler import Scheduler
from fake_clock import FakeClock


def loop(engine, clock, steps=60, after=lambda: None):
    """The engine thread's loop, by hand: the last talk read, the inbox drained, a step."""
    for _ in range(steps):
        engine.step.read_talk()
        engine.thread.drain()
        if not engine.num_active:
            return
        engine.step.run()
        after()
        clock.advance(0.01)


def chunk_delays(read_later_from: int) -> list[int]:
    """Per frame (chunks of one): steps from its stream taking a slot to the frame's delivery."""
    clock = FakeClock()
    engine = Engine.load(dummy="tiny", device="cpu", max_active=8, clock=clock)
    engine.step.audio.read_later_from = read_later_from
    handles = [engine.submit(SynthesisRequest(text=f"Stream {k} speaks on.", max_frames=6, ignore_eos=True,
                                              chunk_frames=(1,))) for k in range(4)]
    step, joined, delays = [0], {}, []

    def after():
        step[0] += 1
        for s in engine.scheduler.running:
            joined.setdefault(s.id, step[0])
        for h in handles:
            while True:
                try:
                    item = h._queue.get_nowait()
                except queue.Empty:
                    break
                delays.extend([step[0] - joined[h.id]] * len(item.codes))
    loop(engine, clock, after=after)
    return delays


def test_frames_of_a_batch_read_late_reach_listeners_as_soon_as_frames_read_at_once():
    assert chunk_delays(2) == chunk_delays(64)        # 4 streams: read late from 2, at once below 64


def test_the_step_cost_counts_the_device_wait_read_at_the_next_loop(monkeypatch):
    wait, ready = transfer.HostCopy.wait, transfer.HostCopy.ready

    def device(self):                       # a 150 ms device step: what each read of its results waits
        time.sleep(0.15)
        return wait(self)
    monkeypatch.setattr(transfer.HostCopy, "wait", device)
    monkeypatch.setattr(transfer.HostCopy, "ready", lambda self: False)     # as a device still running
    costs = {}
    for read_later_from in (64, 2):
        clock = FakeClock()
        engine = Engine.load(dummy="tiny", device="cpu", max_active=8, clock=clock)
        engine.step.audio.read_later_from = read_later_from
        for k in range(4):
            engine.submit(SynthesisRequest(text=f"Stream {k} speaks on and on.", max_frames=12, ignore_eos=True))
        loop(engine, clock, steps=10)
        costs[read_later_from] = engine.step.step_ms
    assert costs[2] > 0.5 * costs[64], costs        # admission and the playout margins go by this figure


def test_a_stream_whose_frames_are_done_frees_its_blocks_before_another_is_ended_for_one():
    kv = SimpleNamespace(room_for_one=lambda s: False)
    sched = Scheduler(SimpleNamespace(text_pad=0, text_eos=1), 4, 64, kv, admission=None, max_context=1000)
    stream = lambda reason: SimpleNamespace(frame_started=False, finish_reason=reason, kv=SimpleNamespace(num_tokens=9))
    stalled, done, ended = stream(None), stream("eos"), []
    sched.finish = lambda s, reason, last=None: ended.append(s)
    sched.running = [done, stalled]
    assert sched.schedule_talk(Plan()).stalled == [stalled] and ended == []
    sched.running = [stalled]                        # its audio out, its blocks freed: none came to the stalled one
    sched.schedule_talk(Plan())
    assert ended == [stalled]


def test_a_step_failing_after_its_talk_still_ends_the_stream_the_talk_drew_eos_for(monkeypatch):
    engine = Engine.load(dummy="tiny", device="cpu", max_active=8, clock=FakeClock())
    request = lambda k: SynthesisRequest(text=f"Stream {k} speaks on.", max_frames=12, ignore_eos=True)
    ending, other = engine.submit(request(0)), engine.submit(request(1))
    talk, predict, steps = engine.runner.talk, engine.runner.predict, [0]

    def talk_eos(plan_talk):                     # at the fourth step the talk draws EOS for the first stream
        out = talk(plan_talk).clone()
        if steps[0] == 3:
            out[[s.id for s in plan_talk.seqs].index(ending.id)] = engine.model.eos
        return out

    def predict_fails(seqs):                     # and that step fails after its talk
        if steps[0] == 3:
            raise RuntimeError("injected")
        return predict(seqs)
    monkeypatch.setattr(engine.runner, "talk", talk_eos)
    monkeypatch.setattr(engine.runner, "predict", predict_fails)
    for _ in range(60):
        engine.step.read_talk()
        engine.thread.drain()
        if not engine.num_active:
            break
        try:
            engine.thread.isolation.run(engine.step.run)
        except RuntimeError as exc:
            engine.thread._step_failed(exc)
        steps[0] += 1
    frames = [sum(len(c.codes) for c in h.iter_blocking()) for h in (ending, other)]
    assert frames[1] == 12 and frames[0] < 12           # EOS ended it, though its step failed
