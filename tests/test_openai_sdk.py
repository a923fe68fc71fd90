"""The unchanged OpenAI SDK against a served gateway (tiny CustomVoice engine): every response format decoded back,
streaming with `with_streaming_response`, SSE, OpenAI's voice names and speed."""
import base64
import io
import json
import time
import wave
from dataclasses import replace

import av
import numpy as np
import openai
import pytest

from engine import Engine, SamplingParams, SynthesisRequest
from engine.api.handle import RequestHandle
from engine.api.request import UnjoinedChunk
from gateway.audio import to_pcm16
from gateway.app_state import GatewayConfig
from server_thread import ServerThread
from gateway.voice_map import OPENAI_VOICES

pytestmark = pytest.mark.slow                # the OpenAI SDK, every format through FFmpeg

FRAMES = 40                   # up to 3.2 s of audio a request: long enough to see the stream before its end
SEED = 7
TEXT = "Hello from the gateway, through the OpenAI SDK."


@pytest.fixture(scope="module")
def server():
    """The gateway, its engine seeded (the same text, the same audio) and recording each request's voice and the
    samples it generated: the random tiny model may end an utterance before FRAMES."""
    engine = Engine.load(dummy="tiny", device="cpu", max_active=4).start()
    requests, sequence = [], engine.sequence

    def recording_sequence(seq_id, request, handle):
        if isinstance(handle, RequestHandle):     # the core's warm-up, in process
            return sequence(seq_id, request, handle)
        record = {"voice": request.voice, "samples": 0}
        requests.append(record)

        class Counting:
            @staticmethod
            def deliver(item):
                if not isinstance(item, Exception):
                    record["samples"] += len((item.joined() if isinstance(item, UnjoinedChunk) else item).pcm)
                handle.deliver(item)
        return sequence(seq_id, replace(request, sampling=replace(request.sampling, seed=SEED)), Counting)

    engine.sequence = recording_sequence
    srv = ServerThread(engine, GatewayConfig(max_frames=FRAMES)).start()
    srv.requests = requests
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0) as client:
        yield client


def samples_of(data: bytes, fmt: str) -> float:
    """The decoded audio's length in 24 kHz samples."""
    if fmt == "pcm":
        return len(data) / 2
    with av.open(io.BytesIO(data)) as container:
        rate = container.streams.audio[0].sample_rate
        return sum(f.samples for f in container.decode(audio=0)) * 24000 / rate


@pytest.mark.parametrize("fmt", [None, "wav", "mp3", "opus", "flac", "aac", "pcm"])
def test_create_gives_each_format_at_the_audio_length(server, client, fmt):
    kwargs = {"response_format": fmt} if fmt else {}
    response = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, **kwargs)
    media = {None: "audio/mpeg", "wav": "audio/wav", "mp3": "audio/mpeg", "opus": "audio/ogg", "flac": "audio/flac",
             "aac": "audio/aac", "pcm": "audio/pcm"}[fmt]
    generated = server.requests[-1]["samples"]
    assert response.response.headers["content-type"] == media and generated >= FRAMES // 2 * 1920
    assert abs(samples_of(response.content, fmt or "mp3") - generated) <= 2048       # codec delay and padding
    if fmt == "wav":                                   # not streamed: the header's sizes are exact
        with wave.open(io.BytesIO(response.content)) as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()) == (24000, 1, 2, generated)


@pytest.mark.parametrize("fmt", ["wav", "mp3"])
def test_with_streaming_response_gets_audio_before_the_utterance_ends(server, client, fmt):
    t0 = time.monotonic()
    with client.audio.speech.with_streaming_response.create(model="tts-1", voice="nova", input=TEXT,
                                                            response_format=fmt) as response:
        arrivals = [(time.monotonic() - t0, chunk) for chunk in response.iter_bytes()]
    first, end = arrivals[0][0], arrivals[-1][0]
    assert response.headers["transfer-encoding"] == "chunked" and len(arrivals) >= 3
    assert first < 0.5 * end, (first, end)
    data = b"".join(chunk for _, chunk in arrivals)
    assert abs(samples_of(data, fmt) - server.requests[-1]["samples"]) <= 2048
    if fmt == "wav":                                   # streamed: the sizes a streaming WAV writer leaves
        assert data[4:8] == data[40:44] == b"\xff\xff\xff\xff"


def test_sse_sends_openai_events(server, client):
    response = client.audio.speech.create(model="tts-1", voice="echo", input=TEXT, response_format="pcm",
                                          stream_format="sse")
    assert response.response.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events] == ["speech.audio.delta"] * (len(events) - 1) + ["speech.audio.done"]
    assert len(events) >= 4
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    frames = server.requests[-1]["samples"] // 1920
    assert len(audio) == server.requests[-1]["samples"] * 2
    assert events[-1]["usage"] == {"input_tokens": 0, "output_tokens": frames, "total_tokens": frames}


def test_input_takes_the_layout_the_official_code_defaults_to(server, client):
    """tiny is a CustomVoice: the whole text in the prompt, as generate_custom_voice does by default."""
    response = client.audio.speech.create(model="tts-1", voice="ryan", input=TEXT, response_format="pcm")
    got = np.frombuffer(response.content, "<i2").astype(np.int32)

    def engine_pcm(non_streaming_text: bool) -> np.ndarray:
        request = SynthesisRequest(text=TEXT, voice="ryan", max_frames=FRAMES, sampling=SamplingParams(seed=SEED),
                                   non_streaming_text=non_streaming_text)
        return to_pcm16(np.concatenate([c.pcm for c in server.engine.submit(request).iter_blocking()])).astype(np.int32)

    whole, streaming = engine_pcm(True), engine_pcm(False)
    assert len(got) == len(whole) and np.abs(got - whole).max() <= 64
    assert len(streaming) != len(whole) or np.abs(streaming - whole).max() > 64


def test_openai_voice_names_reach_the_models_speakers(server, client):
    for name in ("alloy", "onyx", {"id": "ryan"}):
        client.audio.speech.create(model="tts-1", voice=name, input="Hi.", response_format="pcm")
    assert [r["voice"] for r in server.requests[-3:]] == [OPENAI_VOICES["alloy"], OPENAI_VOICES["onyx"], "ryan"]
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.speech.create(model="tts-1", voice="nobody", input="Hi.")
    assert info.value.body["code"] == "unknown_voice"


@pytest.mark.parametrize("speed", [0.5, 2.0])
def test_speed_stretches_the_audio(server, client, speed):
    response = client.audio.speech.create(model="tts-1", voice="sage", input=TEXT, response_format="wav", speed=speed)
    stretched = server.requests[-1]["samples"] / speed
    assert abs(samples_of(response.content, "wav") - stretched) <= 0.03 * stretched


def test_speed_out_of_range_is_refused(client):
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.speech.create(model="tts-1", voice="alloy", input="Hi.", speed=4.5)
    assert info.value.body["code"] == "invalid_request" and "speed" in info.value.body["message"]
