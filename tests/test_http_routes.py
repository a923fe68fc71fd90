"""What every HTTP route shares (http_api.api, speech_body): a draining server answers shutting_down with Retry-After
in each route's own error shape; an MP3 encode (a one-shot response, or ElevenLabs' socket) runs off the event loop,
so that it never holds up another client's stream."""
import base64
import json
import threading

import pytest
from websockets.sync.client import connect

from engine import Engine
from gateway.dialects import elevenlabs
from gateway.app_state import GatewayConfig
from server_thread import ServerThread

KEY = "route-key"
CARTESIA = {"model_id": "sonic-3", "transcript": "Hello there.", "voice": {"mode": "id", "id": "ryan"},
            "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 16000}}
TTS = "/v1/text-to-speech/ryan"
MP3 = "mp3_44100_128"
ROUTES = [  # method, path, headers, JSON body, the error code as the route's shape has it
    ("POST", "/v1/audio/speech", {"Authorization": f"Bearer {KEY}"}, {"input": "Hi.", "voice": "ryan"},
     lambda body: body["error"]["code"]),
    ("GET", "/v1/voices", {"Authorization": f"Bearer {KEY}"}, None, lambda body: body["error"]["code"]),
    ("POST", "/tts/bytes", {"X-API-Key": KEY}, CARTESIA, lambda body: (body["error_code"], body["status_code"])),
    ("POST", TTS, {"xi-api-key": KEY}, {"text": "Hi."}, lambda body: body["detail"]["status"]),
    ("POST", f"{TTS}/stream?output_format=pcm_16000", {"xi-api-key": KEY}, {"text": "Hi."},
     lambda body: body["detail"]["status"]),
]


@pytest.fixture(scope="module")
def server():
    engine = Engine.load(dummy="tiny", device="cpu", max_active=4).start()
    srv = ServerThread(engine, GatewayConfig(api_keys=(KEY,), max_frames=6)).start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("method, path, headers, body, code", ROUTES, ids=[r[1] for r in ROUTES])
def test_every_route_answers_a_draining_server_with_shutting_down_and_retry_after(server, method, path, headers,
                                                                                   body, code):
    assert server.http.request(method, path, headers=headers, json=body).status_code in (200, 201)
    server.gateway.status = "shutting_down"
    try:
        response = server.http.request(method, path, headers=headers, json=body)
    finally:
        server.gateway.status = "ready"
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    assert code(response.json()) in ("shutting_down", ("shutting_down", 503))
    wrong = server.http.request(method, path, headers={k: "wrong" for k in headers}, json=body)
    assert wrong.status_code == 401 and "retry-after" not in wrong.headers


def mp3_over_http(server) -> bytes:
    response = server.http.post(f"{TTS}/stream?output_format={MP3}", headers={"xi-api-key": KEY},
                                json={"text": "Hi."}, timeout=120)
    assert response.status_code == 200 and response.headers["content-type"] == "audio/mpeg"
    return response.content


def mp3_over_websocket(server) -> bytes:
    url = server.url.replace("http", "ws") + f"{TTS}/stream-input?output_format={MP3}"
    audio = b""
    with connect(url, additional_headers={"xi-api-key": KEY}, open_timeout=60) as ws:
        for body in ({"text": " "}, {"text": "Hi. ", "flush": True}, {"text": ""}):
            ws.send(json.dumps(body))
        for frame in ws:
            body = json.loads(frame)
            audio += base64.b64decode(body.get("audio") or "")
            if body.get("isFinal"):
                return audio
    return audio


@pytest.mark.parametrize("held", [mp3_over_http, mp3_over_websocket])
def test_a_blocked_mp3_encode_holds_up_no_other_stream(server, monkeypatch, held):
    entered, release, timed_out = threading.Event(), threading.Event(), []
    encode = elevenlabs.Mp3.encode

    def blocking(self, pcm16: bytes, final: bool = False) -> bytes:
        entered.set()
        if not release.wait(60):
            timed_out.append(True)          # the event loop was held: the other stream could not be served
        return encode(self, pcm16, final)

    monkeypatch.setattr(elevenlabs.Mp3, "encode", blocking)
    mp3 = {}
    thread = threading.Thread(target=lambda: mp3.update(audio=held(server)))
    thread.start()
    try:
        assert entered.wait(60)
        other = server.http.post(f"{TTS}?output_format=pcm_16000", headers={"xi-api-key": KEY},
                                 json={"text": "Meanwhile."}, timeout=120)
        served_while_held = not release.is_set() and not timed_out
    finally:
        release.set()
        thread.join(120)
    assert other.status_code == 200 and len(other.content) > 0 and served_while_held
    assert mp3["audio"][:3] == b"ID3" or mp3["audio"][0] == 0xFF       # an MP3 header or frame sync
