"""A side turn within the engine's step, after its predict and before its decode: on a GPU the turn runs alone and
the decode follows it beside the next step; the step's end never waits for that decode; no turn while fault
isolation steps a part of the streams; a CPU turn that outlasts the engine's wait still has no decode beside it."""
import threading
import time

from engine import Engine, SamplingParams, SynthesisRequest
from engine.core.sequence import Status
from test_stub_model import StubModel


def stub_engine(offer) -> Engine:
    engine = Engine(StubModel(), max_active=8, kv_tokens_per_stream=64)
    engine.side_work.offer = offer
    engine.side_work.attach()
    engine.side_work.wanted = 0.01                    # a caller waits for a turn at every step
    return engine


def speak(engine: Engine, *texts: str) -> None:
    engine.start()
    try:
        for handle in [engine.submit(SynthesisRequest(text=t, max_frames=12, ignore_eos=True)) for t in texts]:
            try:
                list(handle.iter_blocking())
            except Exception:                          # the stream that made the step fail
                pass
    finally:
        engine.shutdown()


def test_a_side_turn_comes_between_a_steps_predict_and_its_decode():
    log = []
    engine = stub_engine(lambda budget, settle: log.append("turn"))
    for stage in ("predict", "decode"):
        def logged(*args, _call=getattr(engine.runner, stage), _stage=stage):
            log.append(_stage)
            return _call(*args)
        setattr(engine.runner, stage, logged)
    speak(engine, "hello")
    steps = [log[i:i + 3] for i, stage in enumerate(log) if stage == "predict"]
    assert steps and all(step == ["predict", "turn", "decode"] for step in steps)


class DeviceCopy:
    """A decode's copy still on the device (queued behind the turn) until waited for."""
    def __init__(self, inner, waits: list, step):
        self.inner, self.waits, self.step, self.launched = inner, waits, step, step.steps

    def ready(self) -> bool:
        return False

    def wait(self):
        self.waits.append(self.step.steps == self.launched)
        return self.inner.wait()


def test_the_steps_end_never_waits_for_its_decode_queued_behind_a_turn():
    """A small batch reads its audio at the step's end; behind a turn it is read a step later instead."""
    waits = []
    engine = stub_engine(lambda budget, settle: settle() or "done")    # a device event: the turn was queued
    engine.thread._follow = lambda done: None
    decode = engine.runner.decode
    engine.runner.decode = lambda seqs, codes: DeviceCopy(decode(seqs, codes), waits, engine.step)
    speak(engine, "hello there")
    assert waits and not any(waits)


def test_no_turn_while_fault_isolation_steps_a_part_of_the_streams():
    seen = []
    engine = stub_engine(lambda budget, settle: None)
    offer_turn = engine.thread._offer_turn

    def recording():
        seen.append((len(engine.scheduler.running),
                     sum(s.status is Status.RUNNING for s in engine.thread.seqs.values())))
        return offer_turn()
    engine.thread._offer_turn = recording
    decode = engine.runner.decode
    engine.runner.decode = lambda seqs, codes: decode(seqs, codes) if all(s.id != 4 for s in seqs) else 1 / 0
    speak(engine, *[f"stream number {k} talks on" for k in range(4)])    # ids 1-4: the fourth fails its steps
    assert seen and all(running == live for running, live in seen)


def test_a_cpu_turn_that_outlasts_the_engines_wait_has_no_decode_beside_it():
    engine = Engine.load(dummy="tiny", device="cpu", max_active=8).start()
    stop, inside, beside = threading.Event(), [False], []
    decode = engine.runner.decode
    engine.runner.decode = lambda seqs, codes: beside.append(inside[0]) or decode(seqs, codes)

    def side():
        while not stop.is_set():
            with engine.side_work.turn(0.05) as turn:
                if turn.given:
                    inside[0] = True
                    time.sleep(0.3)                    # a CPU slice longer than it said
                    inside[0] = False
    worker = threading.Thread(target=side)
    worker.start()
    try:
        list(engine.submit(SynthesisRequest(text="A long enough sentence to be spoken for a while.", max_frames=40,
                                            ignore_eos=True, sampling=SamplingParams(seed=1))).iter_blocking())
    finally:
        stop.set()
        engine.side_work.idle()
        worker.join(5)
        engine.shutdown()
    assert beside and not any(beside) and engine.side_work.stats["given"] > 0
