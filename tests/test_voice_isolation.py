"""Registrations never stall another client's stream: a victim's largest gap between chunks while registrations of
every allowed extreme run beside it stays within 2x of its gap without them (on the engine thread one stalled every
stream for up to 13.9 s). Both are measured here, in turns, on whatever else loads the machine: the median of the rounds
with registrations against the worst round without. The bound is loose because two vCPUs may be one core's two
hyperthreads, where any compute beside the step slows it (1.55x seen in CI); the device share is measured on the H100
by bench/voice_gap_bench.py."""
import threading

import numpy as np
import pytest

from bench.voice_gap_bench import extremes
from engine import Engine, EngineInputError, SamplingParams, SynthesisRequest, VoiceRef
from engine.api.voice_input import read_reference_wav

ROUNDS, FRAMES = 3, 48
EXTREMES = [VoiceRef(*read_reference_wav(wav), text, x_vector_only=text is None) for wav, text in extremes().values()]


@pytest.fixture(scope="module")
def engine():
    engine = Engine.load(dummy="tiny-0.6B-Base", device="cpu", max_active=2).start()
    engine.register_voice("victim", EXTREMES[2]).result(60)
    yield engine
    engine.shutdown()


def victim_gap(engine: Engine) -> float:
    request = SynthesisRequest(text="The victim keeps on speaking, minding its own business.", voice="victim",
                               max_frames=FRAMES, ignore_eos=True, chunk_frames=(4,), sampling=SamplingParams(seed=1))
    sent = [chunk.sent_at for chunk in engine.submit(request).iter_blocking()]
    assert len(sent) > 4
    return float(np.diff(sent).max())


@pytest.mark.slow
def test_registrations_of_every_extreme_leave_a_stream_its_cadence(engine):
    victim_gap(engine)                                    # warm-up
    alone, beside = [], []
    for _ in range(ROUNDS):
        alone.append(victim_gap(engine))
        stop, futures = threading.Event(), []

        def register():                                   # one running, one waiting, all along
            while not stop.is_set():
                if sum(not f.done() for f in futures) < 2:
                    try:
                        futures.append(engine.register_voice(f"r{len(futures)}", EXTREMES[len(futures) % 4]))
                    except EngineInputError:
                        pass
                stop.wait(0.01)

        thread = threading.Thread(target=register)
        thread.start()
        while not any(f.running() for f in futures):
            stop.wait(0.01)
        beside.append(victim_gap(engine))
        running_at_end = any(f.running() for f in futures)
        stop.set()
        thread.join()
        assert running_at_end and all(f.result(300) for f in futures)
    print(f"victim's largest gap: alone {alone}, beside registrations {beside}")
    assert np.median(beside) <= 2 * max(alone), (alone, beside)
