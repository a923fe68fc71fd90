"""HTTP API and serving on a Base (voice-clone) tiny dummy engine: speech, voices, metrics, graceful shutdown."""
import asyncio
import base64
import io
import threading
import wave

import httpx
import numpy as np
import pytest
import websockets

from engine import Engine
from engine.api.wav import write_wav
from gateway.app_state import GatewayConfig
from server_thread import ServerThread
from qwen_tts_client import protocol as p

FRAMES = 12


@pytest.fixture(scope="module")
def server():
    engine = Engine.load(dummy="tiny-0.6B-Base", device="cpu", max_active=8).start()
    srv = ServerThread(engine, GatewayConfig(max_frames=FRAMES, shutdown_grace=10.0)).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def voice(server, http, tmp_path_factory):
    """A registered clone voice; counts how often the engine computes clone conditioning."""
    model = server.engine.model
    calls, make_voice = [], model.make_voice
    model.make_voice = lambda ref: calls.append(ref) or make_voice(ref)
    path = tmp_path_factory.mktemp("ref") / "ref.wav"
    t = np.arange(36000) / 24000
    write_wav(path, (0.3 * np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t)) / 2).astype(np.float32))
    body = {"name": "alice", "audio": base64.b64encode(path.read_bytes()).decode(), "text": "A short reference."}
    response = http.post("/v1/voices", json=body)
    assert response.status_code == 201 and response.json() == {"name": "alice", "type": "clone"}
    yield "alice", calls
    model.make_voice = make_voice


def read_wav(data: bytes) -> tuple[int, int, int, int]:
    with wave.open(io.BytesIO(data)) as w:
        return w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()


def test_health_reports_the_model(http):
    info = http.get("/health").json()
    assert (info["status"], info["model_type"], info["sample_rate"]) == ("ready", "base", 24000)


def test_speech_returns_a_wav_and_reuses_the_registered_voice(http, voice):
    name, calls = voice
    assert {"name": name, "type": "clone"} in http.get("/v1/voices").json()["voices"]
    for _ in range(2):
        body = {"model": "tts-1", "input": "Hello from the clone.", "voice": name, "response_format": "wav"}
        response = http.post("/v1/audio/speech", json=body)
        assert response.status_code == 200 and response.headers["content-type"] == "audio/wav"
        rate, channels, width, frames = read_wav(response.content)
        assert (rate, channels, width) == (24000, 1, 2) and 0 < frames <= FRAMES * 1920 and frames % 1920 == 0
    assert len(calls) == 1                                        # computed at registration only


def test_speech_streams_when_asked(http, voice):
    chunks = []
    body = {"input": "Streaming is faster to first audio.", "voice": voice[0], "response_format": "wav",
            "stream": True}                                       # the field from before stream_format
    with http.stream("POST", "/v1/audio/speech", json=body) as response:
        assert response.status_code == 200
        chunks = list(response.iter_raw())
    data = b"".join(chunks)
    assert len(chunks) >= 3 and data[:4] == b"RIFF" and data[36:40] == b"data"
    assert (len(data) - 44) % (1920 * 2) == 0 and 0 < len(data) - 44 <= FRAMES * 1920 * 2
    pcm = http.post("/v1/audio/speech", json={**body, "stream": False, "response_format": "pcm"})
    assert pcm.headers["content-type"] == "audio/pcm" and len(pcm.content) % (1920 * 2) == 0


def test_clone_voice_over_the_websocket(server, voice):
    async def run():
        async with websockets.connect(server.ws_url) as ws:
            assert voice[0] in p.parse_server(await ws.recv()).voices
            await ws.send(p.encode(p.Text("c", "Cloned and streamed.", voice=voice[0], seed=1)))
            await ws.send(p.encode(p.End("c")))
            messages = []
            while not messages or not isinstance(messages[-1], (p.Done, p.Error)):
                messages.append(p.parse_server(await ws.recv()))
            return messages

    messages = asyncio.run(run())
    audio = sum(len(m.data) for m in messages if isinstance(m, p.Audio)) // 2
    assert isinstance(messages[-1], p.Done) and audio > 0 and messages[-1].audio_ms == audio / 24


@pytest.mark.parametrize("body, status, code", [
    ({"input": "Hi", "voice": "alice", "response_format": "ogg"}, 400, "unsupported_format"),
    ({"input": "Hi", "voice": "alice", "stream_format": "chunks"}, 400, "invalid_request"),
    ({"input": "Hi", "voice": "alice", "speed": 4.5}, 400, "invalid_request"),
    ({"input": "Hi", "voice": "alloy"}, 400, "unknown_voice"),       # an OpenAI name: a Base model has no speakers
    ({"voice": "alice"}, 400, "invalid_request"),
    ({"input": "Hi", "voice": "nobody"}, 400, "unknown_voice"),
    ({"input": "Hi"}, 400, "missing_reference"),
    ({"input": "Hi", "voice": "alice", "language": "klingon"}, 400, "unknown_language"),
    ({"input": "Hi", "voice": "alice", "stream": "yes"}, 400, "invalid_request"),
])
def test_speech_errors(server, http, voice, body, status, code):
    response = http.post("/v1/audio/speech", json=body)
    assert response.status_code == status and response.json()["error"]["code"] == code
    assert server.engine.num_active == 0


def test_voice_registration_errors_and_delete(http, voice):
    bad = [({"name": "x", "audio": "not base64!"}, "invalid_audio"),
           ({"name": "bad name", "audio": ""}, "invalid_request"),
           ({"name": "bob", "audio": base64.b64encode(b"RIFF....").decode()}, "invalid_audio")]
    for body, code in bad:
        response = http.post("/v1/voices", json=body)
        assert response.status_code == 400 and response.json()["error"]["code"] == code
    assert http.post("/v1/voices", content=b"{").json()["error"]["code"] == "invalid_json"
    http.post("/v1/voices", json={"name": "temp", "audio": _wav_b64(), "x_vector_only": True}).raise_for_status()
    assert http.delete("/v1/voices/temp").status_code == 204
    assert http.delete("/v1/voices/temp").status_code == 404
    assert http.post("/v1/audio/speech", json={"input": "Hi", "voice": "temp"}).json()["error"]["code"] == "unknown_voice"


def _wav_b64() -> str:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
        w.writeframes((np.sin(np.arange(16000) / 7) * 8000).astype("<i2").tobytes())
    return base64.b64encode(buf.getvalue()).decode()


def test_metrics_expose_latency_load_and_errors(http, voice):
    http.post("/v1/audio/speech", json={"input": "Count me.", "voice": voice[0]})
    text = http.get("/metrics").text
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    assert int(values['tts_time_to_first_audio_seconds_count{api="http"}']) >= 3
    assert int(values['tts_time_to_first_audio_seconds_bucket{api="http",le="+Inf"}']) >= 3
    assert int(values['tts_real_time_factor_count{api="http"}']) >= 1
    relayed = int(values['tts_chunk_relay_seconds_count{api="http"}'])          # every chunk with audio, in process
    assert relayed >= 3 and 0 <= float(values['tts_chunk_relay_seconds_sum{api="http"}']) / relayed < 1.0
    arrived = int(values["tts_chunk_arrival_seconds_count"])                   # its first part: to the front end's read
    assert arrived >= relayed and 0 <= float(values["tts_chunk_arrival_seconds_sum"]) / arrived < 1.0
    core = float(values["tts_chunk_core_seconds_sum"])                         # its first part: the core's hand-off
    assert int(values["tts_chunk_core_seconds_count"]) == arrived and 0 <= core <= float(
        values["tts_chunk_arrival_seconds_sum"])
    assert int(values['tts_errors_total{code="unknown_voice"}']) >= 1
    assert float(values["tts_frames_total"]) > 0
    for gauge in ("tts_active_contexts", "tts_generating_requests", "tts_queued_requests", "tts_frames_per_second",
                  "tts_admission_queue_length", "tts_admission_queue_oldest_wait_ms", "tts_admission_queued_requests",
                  "tts_admission_queue_expired_requests", "tts_admission_queue_wait_seconds"):
        assert float(values[gauge]) >= 0


def test_graceful_shutdown_finishes_closed_text_then_closes_sockets(server, voice):
    async def run():
        async with websockets.connect(server.ws_url) as ws:
            await ws.recv()
            await ws.send(p.encode(p.Text("open", "Still typing", voice=voice[0], seed=2)))
            await ws.send(p.encode(p.Text("closed", "This one is complete.", voice=voice[0], seed=3)))
            await ws.send(p.encode(p.End("closed")))
            first = p.parse_server(await ws.recv())
            threading.Thread(target=server.stop).start()
            messages = [first]
            async for frame in ws:
                messages.append(p.parse_server(frame))
            return messages, ws.close_code, ws.close_reason

    messages, code, reason = asyncio.run(run())
    last = {m.context_id: m for m in messages}
    assert isinstance(last["closed"], p.Done) and last["closed"].audio_ms > 0
    assert isinstance(last["open"], p.Error) and (last["open"].code, last["open"].retryable) == (p.SHUTTING_DOWN, True)
    assert (code, reason) == (p.CLOSE_GOING_AWAY, "server shutting down")
