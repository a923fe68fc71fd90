"""The voice surfaces as a hostile client meets them (issue 33): a bad voice name is `unknown_voice` for its context
or request and the socket stays; registration, deletion and the OpenAI route answer 4xx for what a client got wrong;
a bad query parameter is `invalid_parameter` and a close with 1008."""
import asyncio
import base64

import httpx
import numpy as np
import pytest
import websockets

from engine import Engine
from gateway.app_state import GatewayConfig
from server_thread import ServerThread
from qwen_tts_client import protocol as p
from wav_headers import wav_bytes
from ws_helpers import collect, recv, send

BAD_NAMES = ["../../outside/evil", "/etc/hostname", "a\x00b", "x" * 300, ".", "..", ".hidden", "\udcff"]


def reference(seconds: float = 1.0, rate: int = 16000) -> str:
    noise = np.random.default_rng(0).integers(-3000, 3000, int(seconds * rate)).astype("<i2").tobytes()
    return base64.b64encode(wav_bytes(rate, 0, data=noise)).decode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    engine = Engine.load(dummy="tiny-0.6B-Base", device="cpu", max_active=4,
                         voices_dir=str(tmp_path_factory.mktemp("voices"))).start()
    srv = ServerThread(engine, GatewayConfig(max_frames=6)).start()
    srv.http.post("/v1/voices", json={"name": "good", "audio": reference(), "x_vector_only": True}).raise_for_status()
    yield srv
    srv.stop()


def test_a_bad_voice_name_ends_only_its_context(server):
    async def run():
        async with websockets.connect(server.ws_url) as ws:
            assert "good" in (await recv(ws)).voices
            await send(ws, p.Text("healthy", "I keep speaking.", voice="good", seed=1))
            for i, name in enumerate(BAD_NAMES):
                await ws.send(p.to_json({"type": "text", "context_id": f"bad{i}", "text": "Hi.", "voice": name}))
            await send(ws, p.End("healthy"))
            return await collect(ws, ["healthy"] + [f"bad{i}" for i in range(len(BAD_NAMES))])
    ended = asyncio.run(run())
    assert isinstance(ended["healthy"][-1], p.Done)
    for i, name in enumerate(BAD_NAMES):
        error = ended[f"bad{i}"][-1]
        assert isinstance(error, p.Error) and error.code in (p.UNKNOWN_VOICE, p.INVALID_MESSAGE), (name, error)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_bad_voice_name_is_a_4xx_on_every_http_route(server, name):
    speech = server.http.post("/v1/audio/speech",
                              content=p.to_json({"input": "Hi.", "voice": name}).encode("utf-8", "surrogatepass"))
    assert speech.status_code == 400 and speech.json()["error"]["code"] in (p.UNKNOWN_VOICE, p.INVALID_REQUEST)
    body = p.to_json({"name": name, "audio": reference(), "x_vector_only": True}).encode("utf-8", "surrogatepass")
    registered = server.http.post("/v1/voices", content=body)
    assert registered.status_code == 400 and registered.json()["error"]["code"] == p.INVALID_REQUEST
    if "/" not in name and p.is_unicode(name):
        escaped = "".join(f"%{b:02X}" for b in name.encode())          # '.' and '..' reach the route as they are
        deleted = server.http.delete("/v1/voices/" + escaped)
        assert deleted.status_code == 400 and deleted.json()["error"]["code"] == p.INVALID_REQUEST
    assert "." not in [v["name"] for v in server.http.get("/v1/voices").json()["voices"]]


def test_small_mistakes_are_4xx_not_500(server):
    with httpx.Client(base_url=server.url, timeout=60) as http:
        assert http.post("/v1/audio/speech", json={"input": "Hi.", "voice": "good", "speed": None,
                                                   "response_format": "pcm"}).status_code == 200
        short = http.post("/v1/voices", json={"name": "short", "audio": reference(0.04), "x_vector_only": True})
        assert short.status_code == 400 and short.json()["error"]["code"] == "invalid_audio"
        odd_rate = http.post("/v1/voices", json={"name": "odd", "audio": reference(1, 3000),
                                                 "x_vector_only": True})
        assert odd_rate.status_code == 400 and "sample rate" in odd_rate.json()["error"]["message"]
        nul = http.delete("/v1/voices/a%00b")
        assert nul.status_code == 400 and nul.json()["error"]["code"] == p.INVALID_REQUEST


@pytest.mark.parametrize("query", ["sample_rate=%C2%B2", "sample_rate=-1", "sample_rate=24000.0", "encoding=%00"])
def test_a_bad_query_parameter_is_invalid_parameter_and_1008(server, query):
    async def run():
        async with websockets.connect(f"{server.ws_url}?{query}") as ws:
            error = p.parse_server(await ws.recv())
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
            return error, closed.value.rcvd.code
    error, code = asyncio.run(run())
    assert isinstance(error, p.Error) and error.code == p.INVALID_PARAMETER and code == p.CLOSE_POLICY
