"""The Pipecat TTS service in a real pipeline (PipelineWorker, WorkerRunner) against a real gateway on loopback
(tiny dummy engine)."""
import asyncio
import contextlib

import pytest

pytest.importorskip("pipecat")

from pipecat.frames.frames import (EndFrame, ErrorFrame, InterruptionFrame, LLMFullResponseEndFrame,  # noqa: E402
                                   LLMFullResponseStartFrame, LLMTextFrame, TTSAudioRawFrame, TTSStartedFrame,
                                   TTSStoppedFrame, TTSTextFrame, TTSUpdateSettingsFrame)
from pipecat.pipeline.pipeline import Pipeline  # noqa: E402
from pipecat.pipeline.worker import PipelineWorker  # noqa: E402
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor  # noqa: E402
from pipecat.workers.runner import WorkerRunner  # noqa: E402

from integration_helpers import FRAMES, KEY, PIECES, restart, serve, server, wait_until  # noqa: E402,F401
from qwen_tts_client.pipecat import QwenTTSService  # noqa: E402

pytestmark = pytest.mark.slow                # Pipecat pipelines


class Recorder(FrameProcessor):
    def __init__(self, direction: FrameDirection):
        super().__init__()
        self.direction, self.frames = direction, []

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        if direction == self.direction:
            self.frames.append(frame)
        await self.push_frame(frame, direction)


@contextlib.asynccontextmanager
async def running(tts: QwenTTSService):
    """The service in a running pipeline, with what reaches its upstream and downstream ends."""
    up, down = Recorder(FrameDirection.UPSTREAM), Recorder(FrameDirection.DOWNSTREAM)
    worker = PipelineWorker(Pipeline([up, tts, down]), cancel_on_idle_timeout=False)
    started = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def on_started(*_):
        started.set()

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    run = asyncio.create_task(runner.run())
    await asyncio.wait_for(started.wait(), 10)
    try:
        yield worker, up.frames, down.frames
    finally:
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(run, 20)


def make_tts(srv, **kwargs) -> QwenTTSService:
    return QwenTTSService(**{"base_url": srv.url, "api_key": KEY, "voice": "ryan", "seed": 7,
                             "reconnect_backoff_min_wait": 0.5, "reconnect_backoff_max_wait": 1.0, **kwargs})


def turn(*pieces):
    return [LLMFullResponseStartFrame(), *map(LLMTextFrame, pieces), LLMFullResponseEndFrame()]


def of(frames, kind, context_id=None):
    return [f for f in frames if isinstance(f, kind) and context_id in (None, getattr(f, "context_id", None))]


async def speak_turn(worker, down, pieces, timeout: float = 10) -> str:
    """Queues one LLM turn; the context id of its audio once its TTSStoppedFrame came."""
    stopped = len(of(down, TTSStoppedFrame))
    await worker.queue_frames(turn(*pieces))
    await wait_until(lambda: len(of(down, TTSStoppedFrame)) > stopped, timeout)
    return of(down, TTSStoppedFrame)[-1].context_id


def test_a_turn_yields_started_audio_text_and_stopped_frames(server):
    samples = server.state()["audio_samples"]

    async def run():
        async with running(make_tts(server)) as (worker, up, down):
            return await speak_turn(worker, down, PIECES), list(down), list(up)

    ctx, down, up = asyncio.run(run())
    mine = [f for f in down if getattr(f, "context_id", None) == ctx]
    kinds = [type(f) for f in mine if isinstance(f, (TTSStartedFrame, TTSAudioRawFrame, TTSTextFrame, TTSStoppedFrame))]
    assert kinds[0] is TTSStartedFrame and kinds[1] is TTSAudioRawFrame and kinds[-1] is TTSStoppedFrame
    audio = of(mine, TTSAudioRawFrame)
    assert {(f.sample_rate, f.num_channels) for f in audio} == {(24000, 1)}
    assert sum(len(f.audio) for f in audio) == 2 * (server.state()["audio_samples"] - samples) > 0
    text = of(mine, TTSTextFrame)
    assert " ".join(t.text for t in text) == "".join(PIECES) and len(text) == 6          # a frame per timed word
    assert [t.pts for t in text] == sorted(t.pts for t in text) and text[0].pts > 0
    assert not of(up, ErrorFrame)


def test_a_settings_change_within_a_turn_starts_a_new_context(server):
    async def run():
        async with running(make_tts(server)) as (worker, up, down):
            await worker.queue_frames([LLMFullResponseStartFrame(), LLMTextFrame("Hello there. "),
                                       TTSUpdateSettingsFrame(delta=QwenTTSService.Settings(voice="vivian")),
                                       LLMTextFrame("How are you?"), LLMFullResponseEndFrame()])
            await wait_until(lambda: len(of(down, TTSStoppedFrame)) == 2, 10)
            return list(down), list(up)

    down, up = asyncio.run(run())
    first, second = [f.context_id for f in of(down, TTSStoppedFrame)]
    assert first != second and of(down, TTSAudioRawFrame, first) and of(down, TTSAudioRawFrame, second)
    assert [t.text for t in of(down, TTSTextFrame)] == ["Hello", "there.", "How", "are", "you?"]
    assert not of(up, ErrorFrame)


def test_an_interruption_cancels_the_context_and_the_next_turn_speaks(server):
    async def run():
        async with running(make_tts(server)) as (worker, up, down):
            samples = server.state()["audio_samples"]
            await worker.queue_frames(turn("This turn is interrupted before it is spoken to its end."))
            await wait_until(lambda: of(down, TTSAudioRawFrame), 10)
            sessions = server.state()["sessions"]
            await worker.queue_frame(InterruptionFrame())
            await wait_until(server.idle, 10)
            generated = server.state()["audio_samples"] - samples
            await asyncio.sleep(0.2)
            interrupted = list(down)
            next_ctx = await speak_turn(worker, down, PIECES)
            return interrupted, next_ctx, generated, sessions, server.state()["sessions"]

    interrupted, next_ctx, generated, sessions, after = asyncio.run(run())
    ctx = of(interrupted, TTSAudioRawFrame)[0].context_id
    cut = next(i for i, f in enumerate(interrupted) if isinstance(f, InterruptionFrame))
    assert not of(interrupted[cut:], TTSAudioRawFrame, ctx)              # no audio of it after the interruption
    assert generated < FRAMES * 1920                                      # the gateway stopped generating it
    assert next_ctx != ctx and len(sessions) == 1 and after == sessions  # a new context on the same socket


def test_restart_reconnects_and_errors_are_clear():
    srv = serve(max_frames=4, words=False)

    async def run(srv):
        async with running(make_tts(srv)) as (worker, up, down):
            before = await speak_turn(worker, down, PIECES)
            srv = await asyncio.to_thread(restart, srv, max_frames=4, aligner_timeout=1e-6)
            await wait_until(lambda: srv.state()["sessions"], 10)       # the service reconnected by itself
            after = await speak_turn(worker, down, PIECES)
            errors = [f.error for f in of(up, ErrorFrame)]
            frames = list(down)
        async with running(make_tts(srv, api_key="wrong")) as (worker, up, down):
            wrong_key = [f for f in of(up, ErrorFrame)]
        await asyncio.to_thread(srv.stop)
        async with running(make_tts(srv)) as (worker, up, down):
            down_errors = [f.error for f in of(up, ErrorFrame)]
        return before, after, frames, errors, wrong_key, down_errors

    before, after, frames, errors, wrong_key, down_errors = asyncio.run(run(srv))
    assert before != after and of(frames, TTSAudioRawFrame, before) and of(frames, TTSAudioRawFrame, after)
    # no aligner, or alignment_unavailable (not an end of the context): the turn's text follows its audio, untimed
    for ctx in (before, after):
        assert [t.text for t in of(frames, TTSTextFrame, ctx)] == ["".join(PIECES)]
    assert any("cannot connect to ws://127.0.0.1" in e for e in errors)                # while it was down
    assert any("alignment_unavailable" in e for e in errors)
    assert len(wrong_key) == 1 and "unauthorized" in wrong_key[0].error and wrong_key[0].fatal is False
    assert any("Connect call failed" in e or "refused" in e for e in down_errors)
