"""Pipecat's own CartesiaTTSService and ElevenLabsTTSService, unchanged, in a real pipeline against a real gateway on
loopback (tiny dummy engine and aligner): only `url` and the key point them at it."""
import asyncio
import re
import urllib.request

import pytest

pytest.importorskip("pipecat.services.cartesia.tts")
pytest.importorskip("pipecat.services.elevenlabs.tts")

from pipecat.frames.frames import ErrorFrame, InterruptionFrame, TTSAudioRawFrame, TTSTextFrame  # noqa: E402
from pipecat.services.cartesia.tts import CartesiaTTSService  # noqa: E402
from pipecat.services.elevenlabs.tts import ElevenLabsTTSService  # noqa: E402

from integration_helpers import KEY, PIECES, serve, wait_until  # noqa: E402
from test_integrations_pipecat import of, running, server, speak_turn, turn  # noqa: E402,F401  (server: a fixture)

pytestmark = pytest.mark.slow                # Pipecat pipelines with the vendors' services


def make(kind, srv, **kwargs):
    ws = srv.url.replace("http", "ws")
    if kind == "cartesia":
        return CartesiaTTSService(api_key=KEY, url=f"{ws}/tts/websocket",
                                  settings=CartesiaTTSService.Settings(voice="ryan"), **kwargs)
    return ElevenLabsTTSService(api_key=KEY, url=ws, settings=ElevenLabsTTSService.Settings(voice="ryan"), **kwargs)


def metrics(srv) -> dict[str, float]:
    """The unlabelled samples of the gateway's /metrics."""
    text = urllib.request.urlopen(f"{srv.url}/metrics", timeout=10).read().decode()
    return {name: float(value) for name, value in re.findall(r"^(tts_[a-z_]+) (\S+)$", text, re.M)}


@pytest.mark.parametrize("kind", ["cartesia", "elevenlabs"])
def test_a_turn_is_spoken_with_word_timestamps(server, kind):
    samples = server.state()["audio_samples"]

    async def run():
        async with running(make(kind, server)) as (worker, up, down):
            return await speak_turn(worker, down, PIECES), list(down), list(up)

    ctx, down, up = asyncio.run(run())
    audio = of(down, TTSAudioRawFrame, ctx)
    assert {(f.sample_rate, f.num_channels) for f in audio} == {(24000, 1)}
    assert sum(len(f.audio) for f in audio) == 2 * (server.state()["audio_samples"] - samples) > 0   # all of it
    words = [t.text for t in of(down, TTSTextFrame, ctx)]
    assert " ".join(words).split() == "".join(PIECES).split()                   # a frame per timed word
    pts = [t.pts for t in of(down, TTSTextFrame, ctx)]
    assert pts == sorted(pts)
    assert not of(up, ErrorFrame)


LONG = 200                                      # frames: a turn still generating when its first audio is heard


@pytest.fixture(scope="module")
def long_server():
    srv = serve(max_frames=LONG)
    yield srv
    srv.stop()


@pytest.mark.parametrize("kind", ["cartesia", "elevenlabs"])
def test_an_interruption_ends_the_servers_generation(long_server, kind):
    server = long_server
    async def run():
        async with running(make(kind, server)) as (worker, up, down):
            before = metrics(server)["tts_audio_seconds_total"]
            await worker.queue_frames(turn("This turn is interrupted before it is spoken to its end."))
            await wait_until(lambda: of(down, TTSAudioRawFrame), 10)
            generating = server.state()["generating"]                   # still speaking when interrupted
            await worker.queue_frame(InterruptionFrame())
            await wait_until(server.idle, 10)                            # nothing generating, no context open
            after = metrics(server)
            generated = after["tts_audio_seconds_total"] - before
            assert after["tts_active_contexts"] == 0
            next_ctx = await speak_turn(worker, down, PIECES, 40)     # up to LONG frames (16 s) on a CPU
            return generating, generated, next_ctx, list(down), list(up)

    generating, generated, next_ctx, down, up = asyncio.run(run())
    assert generating == 1 and generated < LONG * 0.08 / 2              # the gateway stopped generating it
    assert of(down, TTSAudioRawFrame, next_ctx)                          # and the next turn speaks
    assert not of(up, ErrorFrame)
