"""The LiveKit Agents plugin against a real gateway on loopback (tiny dummy engine), through the framework's own
SynthesizeStream/ChunkedStream machinery."""
import asyncio
import time

import pytest

pytest.importorskip("livekit.agents")

from livekit.agents import APIConnectionError, APIConnectOptions, APIStatusError  # noqa: E402
from livekit.agents.types import USERDATA_TIMED_TRANSCRIPT  # noqa: E402

from integration_helpers import FRAMES, KEY, PIECES, restart, serve, server, wait_until  # noqa: E402,F401
from qwen_tts_client import protocol as p  # noqa: E402
from qwen_tts_client.livekit import QwenTTS  # noqa: E402
from qwen_tts_client.livekit.stream import timed  # noqa: E402
from qwen_tts_client.word_pieces import WordPieces  # noqa: E402

pytestmark = pytest.mark.slow                # LiveKit Agents pipelines


def make_tts(srv, **kwargs) -> QwenTTS:
    return QwenTTS(**{"base_url": srv.url, "api_key": KEY, "voice": "ryan", "seed": 7, **kwargs})


async def speak(tts: QwenTTS, pieces, conn_options: APIConnectOptions | None = None):
    """Audio frames and timed transcripts of one stream fed `pieces`."""
    stream = tts.stream(**({"conn_options": conn_options} if conn_options else {}))
    for piece in pieces:
        stream.push_text(piece)
    stream.end_input()
    frames, timed = [], []
    async with stream:
        async for ev in stream:
            frames.append(ev.frame)
            timed += ev.frame.userdata.get(USERDATA_TIMED_TRANSCRIPT, [])
    return frames, timed


def test_streamed_pieces_give_audio_of_the_utterance_and_its_transcript(server):
    async def run():
        tts = make_tts(server, sample_rate=16000)
        try:
            return await speak(tts, PIECES)
        finally:
            await tts.aclose()

    frames, timed = asyncio.run(run())
    assert {(f.sample_rate, f.num_channels) for f in frames} == {(16000, 1)}
    assert sum(f.samples_per_channel for f in frames) == FRAMES * 1280            # 80 ms frames at 16 kHz
    assert "".join(timed) == "".join(PIECES)                                        # a piece per timed word
    assert len(timed) == 6 and all(0 <= t.start_time <= t.end_time <= FRAMES * 0.08 for t in timed)


def test_words_events_become_timed_strings_that_join_to_the_text():
    text = WordPieces()
    text.text = "Hello there, how are you? "
    pieces = timed(text, p.Words("c", ["Hello", "there"], [0.0, 0.4], [0.35, 0.7], [0, 6], [5, 11]))
    pieces += timed(text, p.Words("c", ["how", "are", "you"], [0.8, 1.0, 1.2], [0.95, 1.15, 1.5], [13, 17, 21],
                                  [16, 20, 24]))
    assert pieces == ["Hello", " there,", " how", " are", " you?"]
    assert [(t.start_time, t.end_time) for t in pieces] == [(0.0, 0.35), (0.4, 0.7), (0.8, 0.95), (1.0, 1.15),
                                                              (1.2, 1.5)]
    assert text.rest() == (" ", 1.5) and text.rest() is None


def test_markdown_and_emoji_are_left_to_the_sessions_transforms(server):
    """AgentSession filters markdown and emoji before its TTS by default: the gateway's filters would run twice."""
    from livekit.agents.voice.agent_session import DEFAULT_TTS_TEXT_TRANSFORMS
    assert set(DEFAULT_TTS_TEXT_TRANSFORMS) == {"filter_markdown", "filter_emoji"}
    opts = make_tts(server)._options
    assert (opts["filter_markdown"], opts["filter_emoji"], opts.get("filter_think", True)) == (False, False, True)
    assert make_tts(server, filter_markdown=True)._options["filter_markdown"] is True


def test_synthesize_and_an_interrupted_stream_share_one_socket(server):
    async def run():
        tts = make_tts(server)
        try:
            whole = await tts.synthesize("Good morning.").collect()
            sessions = server.state()["sessions"]
            stream = tts.stream()
            stream.push_text("This sentence is interrupted before it is spoken to its end")
            await anext(stream)                                        # the first audio: mid-utterance
            assert server.state()["open_contexts"] == 1
            await stream.aclose()                                      # how an agent leaves an interrupted stream
            await wait_until(server.idle, 2.0)
            frames, _ = await speak(tts, PIECES)                       # the same socket still speaks
            return whole, frames, sessions, server.state()
        finally:
            await tts.aclose()

    whole, frames, sessions, after = asyncio.run(run())
    # the framework's synthesize-from-stream helper flushes at the end, so it closes with a 10 ms silent marker
    assert FRAMES * 0.08 <= whole.duration <= FRAMES * 0.08 + 0.01 and whole.sample_rate == 24000
    assert sum(f.samples_per_channel for f in frames) == FRAMES * 1920
    assert len(sessions) == 1 and after["sessions"] == sessions       # ended by `cancel`, not by a socket close
    assert not after["errors"]


def test_restart_reconnects_and_errors_are_clear():
    srv = serve(max_frames=4, words=False)
    no_retry = APIConnectOptions(max_retry=0, timeout=5)

    async def run(srv):
        tts, wrong = make_tts(srv, retries=0), make_tts(srv, api_key="wrong")
        try:
            before = await speak(tts, PIECES)
            await asyncio.to_thread(srv.stop)
            with pytest.raises(APIConnectionError, match="cannot connect to ws://127.0.0.1"):
                await speak(tts, PIECES, no_retry)
            srv = await asyncio.to_thread(restart, srv, max_frames=4, aligner_timeout=1e-6)
            after = await speak(tts, PIECES, no_retry)
            t0 = time.monotonic()
            with pytest.raises(APIStatusError, match="unauthorized") as wrong_key:
                await speak(wrong, PIECES)
            return srv, before, after, wrong_key.value, time.monotonic() - t0
        finally:
            await tts.aclose()
            await wrong.aclose()

    srv, before, after, wrong_key, seconds = asyncio.run(run(srv))
    srv.stop()
    assert before[0] and before[1] == []         # no aligner: no timings (the agent's transcript is its own text)
    assert after[0] and after[1] == []           # alignment_unavailable: the stream speaks on, untimed
    assert wrong_key.status_code == 401 and not wrong_key.retryable and seconds < 1.0      # not retried
