"""LiveKit's own Cartesia and ElevenLabs plugins, unchanged, against a real gateway on loopback (tiny dummy engine and
aligner): only `base_url` and the key point them at it."""
import asyncio

import pytest

pytest.importorskip("livekit.plugins.cartesia")
pytest.importorskip("livekit.plugins.elevenlabs")

from livekit.agents import APIConnectOptions, APIError  # noqa: E402
from livekit.agents.utils import http_context  # noqa: E402
from livekit.plugins import cartesia, elevenlabs  # noqa: E402

from integration_helpers import FRAMES, KEY, PIECES, wait_until  # noqa: E402
from test_integrations_livekit import server, speak  # noqa: E402,F401  (server: a fixture)

pytestmark = pytest.mark.slow                # the vendors' LiveKit plugins

TEXT = "".join(PIECES)
NO_RETRY = APIConnectOptions(max_retry=0, timeout=10)


def make(kind, srv, **kwargs):
    if kind == "cartesia":
        return cartesia.TTS(**{"api_key": KEY, "base_url": srv.url, "voice": "ryan", **kwargs})
    return elevenlabs.TTS(**{"api_key": KEY, "base_url": f"{srv.url}/v1", "voice_id": "ryan",
                             "encoding": "pcm_24000", **kwargs})


def run_with(kind, srv, body, **kwargs):
    async def run():
        async with http_context.open():                   # what the agent worker gives its plugins
            tts = make(kind, srv, **kwargs)
            try:
                return await body(tts)
            finally:
                await tts.aclose()
    return asyncio.run(run())


@pytest.mark.parametrize("kind,rate", [("cartesia", 16000), ("cartesia", 44100), ("elevenlabs", 24000),
                                       ("elevenlabs", 16000), ("elevenlabs", "mp3")])
def test_a_stream_of_pushed_text_is_spoken_with_aligned_transcripts(server, kind, rate):
    option = {"sample_rate": rate} if kind == "cartesia" else {"encoding": f"pcm_{rate}"} if rate != "mp3" else \
        {"encoding": "mp3_22050_32"}                                    # the plugin's default
    mp3, rate = rate == "mp3", 22050 if rate == "mp3" else rate
    before = server.state()["audio_samples"]
    frames, timed = run_with(kind, server, lambda tts: speak(tts, PIECES, NO_RETRY), **option)
    generated = server.state()["audio_samples"] - before                # 24 kHz; the dummy may end before the cap
    assert {(f.sample_rate, f.num_channels) for f in frames} == {(rate, 1)}
    samples = sum(f.samples_per_channel for f in frames)
    # all of it, resampled; LiveKit's emitter may close a segment with 10 ms of silence
    extra = samples - generated * rate / 24000
    assert 0 < generated <= FRAMES * 1920 and (0 <= extra <= rate // 100 + 1 or mp3 and abs(extra) <= 2 * 1152)
    assert "".join(timed).split() == TEXT.split()                       # every word timed, in order
    times = [(t.start_time, t.end_time) for t in timed]
    if kind == "cartesia":                                              # seconds, cumulative over the context
        assert all(0 <= start <= end <= FRAMES * 0.08 + 1e-6 for start, end in times), times
        assert [s for s, _ in times] == sorted(s for s, _ in times)
    # ElevenLabs restarts its alignment times in every message, which this plugin reads as if they did not: as
    # against ElevenLabs itself, its times are those of the message a word ended in (Pipecat's test sums them)
    assert not server.state()["errors"]


@pytest.mark.parametrize("kind", ["cartesia", "elevenlabs"])
def test_synthesize_is_one_http_request_of_raw_audio(server, kind):
    before = server.state()["audio_samples"]
    audio = run_with(kind, server, lambda tts: tts.synthesize("Good morning.", conn_options=NO_RETRY).collect())
    generated = (server.state()["audio_samples"] - before) / 24000
    assert audio.sample_rate == 24000 and audio.num_channels == 1
    assert 0 < generated <= FRAMES * 0.08 and 0 <= audio.duration - generated < 0.011


def test_elevenlabs_synthesize_in_its_default_mp3(server):
    before = server.state()["audio_samples"]
    audio = run_with("elevenlabs", server, lambda tts: tts.synthesize("Good morning.", conn_options=NO_RETRY).collect(),
                     encoding="mp3_22050_32")
    generated = (server.state()["audio_samples"] - before) / 24000
    assert audio.sample_rate == 22050 and 0 < generated <= FRAMES * 0.08
    assert abs(audio.duration - generated) < 0.11                       # MP3's encoder delay and padding


@pytest.mark.parametrize("kind", ["cartesia", "elevenlabs"])
def test_an_unknown_voice_or_key_is_the_dialects_error(server, kind):
    voice = {"voice": "nobody"} if kind == "cartesia" else {"voice_id": "nobody"}
    for options in (voice, {"api_key": "wrong"}):
        with pytest.raises(APIError):
            run_with(kind, server, lambda tts: speak(tts, PIECES, NO_RETRY), **options)
    asyncio.run(wait_until(server.idle, 5))
    errors = server.state()["errors"]
    assert errors.get("unknown_voice") and errors.get("unauthorized")
