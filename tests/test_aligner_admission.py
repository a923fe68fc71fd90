"""Word timestamps through the gateway when the aligner's time runs short: a context refused words is told at once
and speaks on; a job its context gave up on (timed out, cancelled) is dropped from the aligner's queue, not aligned."""
import asyncio
from concurrent.futures import Future


import pytest
import websockets

from aligner import AlignmentService
from qwen_tts_client import protocol as p
from test_aligner_gateway import assert_only_the_words_lost, converse, words_of


@pytest.fixture
def server(words_server):
    return words_server


def test_a_context_refused_words_is_told_before_its_audio_and_speaks_on(server, monkeypatch):
    """The core's aligner answers that the GPU has no time planned for another context's words (its rule:
    test_aligner_plan.py): one `words_refused` with the reason, before the first audio, then the audio to `done` as
    without words; the next context asks again."""
    full = "the device has no time left for word alignment at this load (0.30 device-s/s wanted, 0.20 planned)"
    refusal = Future()
    refusal.set_result(full)
    monkeypatch.setattr(AlignmentService, "admit", lambda self: refusal)
    log, _ = asyncio.run(converse(server, p.Text("f", "no words for this one", seed=3), p.End("f")))
    assert_only_the_words_lost(server, log, p.WORDS_REFUSED)
    refused = next(m for _, m in log if isinstance(m, p.Error))
    assert full in refused.message and not refused.retryable and not p.ends_context(refused)
    assert [type(m) for _, m in log].index(p.Error) < [type(m) for _, m in log].index(p.Audio)
    monkeypatch.undo()
    log, _ = asyncio.run(converse(server, p.Text("g", "words for this one", seed=3), p.End("g")))
    assert words_of(log) and not [m for _, m in log if isinstance(m, p.Error)]


def test_a_job_whose_context_was_cancelled_is_dropped_not_aligned(server):
    """A's batch stalls; B's job waits behind it; B is cancelled: once A's batch is released, B's job is skipped and
    the next context's is aligned."""
    srv, aligner = server, server.aligner
    aligner.stalled.clear(), aligner.release.clear(), aligner.units.clear()

    def queued() -> int:
        metrics = srv.http.get("/metrics").text
        return int(float(next(line.split()[-1] for line in metrics.splitlines()
                              if line.startswith("tts_aligner_queued_jobs"))))

    async def run():
        async with websockets.connect(srv.ws_url) as ws:
            voice = p.parse_server(await ws.recv()).voices[0]
            stalled = asyncio.create_task(converse(srv, p.Text("a", "this will slow now", seed=1), p.End("a")))
            await asyncio.to_thread(aligner.stalled.wait, 30)
            for msg in (p.Text("b", "bravo charlie delta echo", voice=voice, seed=2), p.End("b")):
                await ws.send(p.encode(msg))
            async with asyncio.timeout(30):
                while await asyncio.to_thread(queued) < 1:          # B's job waits in the aligner's queue
                    await asyncio.sleep(0.05)
            await ws.send(p.encode(p.Cancel("b")))
            while not isinstance(p.parse_server(await asyncio.wait_for(ws.recv(), 30)), p.Cancelled):
                pass
            await asyncio.sleep(0.2)                                 # the drop reaches the core before C's text
            after = asyncio.create_task(converse(srv, p.Text("c", "foxtrot golf", seed=3), p.End("c")))
            await asyncio.sleep(0.5)
            aligner.release.set()
            return await stalled, await after

    try:
        (a, _), (c, _) = asyncio.run(run())
    finally:
        aligner.release.set()
    assert "slow" in aligner.units and {"foxtrot", "golf"} <= set(aligner.units)
    assert not {"bravo", "charlie", "delta", "echo"} & set(aligner.units)
    assert [w for w, *_ in words_of(c)] == ["foxtrot", "golf"] and isinstance(c[-1][1], p.Done)


def test_a_context_refused_words_keeps_none_of_the_audio_it_goes_on_speaking():
    """Its words never come (refused, or the aligner failed): its minutes of audio and text are not held for them."""
    import numpy as np

    from aligner import LiveWords
    from fake_clock import FakeClock

    class Refusing:
        def admit(self) -> Future:
            future = Future()
            future.set_result("no time planned")
            return future

        def submit(self, *_):
            raise AssertionError("a refused context submits no job")

    async def run():
        refused = []

        async def on_refused(reason: str) -> None:
            refused.append(reason)

        words = LiveWords(Refusing(), "english", 5.0, FakeClock(), on_refused=on_refused)
        await asyncio.wait_for(words.task, 10)
        for _ in range(3):                                  # three utterances of a minute each
            words.add_text("a minute of words " * 40)
            for _ in range(60):
                words.add_audio(np.zeros(24000, np.float32), final=False)
            words.close_utterance()
            words.add_audio(np.zeros(0, np.float32), final=True)
        await words.settled()
        return refused, words

    refused, words = asyncio.run(run())
    held = sum(u.length for u in words.stream.utterances)
    assert refused == ["no time planned"] and words.spoken_until(1000.0) is None
    assert held == 0 and words.stream.text == "" and len(words.stream.utterances) == 1
