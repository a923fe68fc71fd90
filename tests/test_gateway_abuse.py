"""What a careless or hostile client tried (issue 19, A-C, F, G): every input gets a documented answer, the socket
stays usable, and no other client's stream is touched."""
import asyncio
import contextlib
import logging

import pytest
import websockets

from engine import Engine
from gateway.app_state import GatewayConfig
from server_thread import ServerThread
from qwen_tts_client import protocol as p
from ws_helpers import collect, recv, send, wait_idle

FRAMES = 6           # the victim still speaks when the attack is answered (milliseconds): more frames prove no more
KEY = "sekrit-key-123"


@pytest.fixture(scope="module")
def server():
    engine = Engine.load(dummy="tiny", device="cpu", max_active=4).start()
    srv = ServerThread(engine, GatewayConfig(api_keys=(KEY,), max_frames=FRAMES),
                       log_level="info").start()
    yield srv
    srv.stop()


def connect(srv):
    return websockets.connect(f"{srv.ws_url}?api_key={KEY}")


async def answer(ws) -> p.Error:
    """The next message that is not audio: an error of the documented shape."""
    msg = await recv(ws)
    while isinstance(msg, p.Audio):
        msg = await recv(ws)
    assert isinstance(msg, p.Error) and msg.message and msg.retryable == (msg.code in p.RETRYABLE), msg
    return msg


def with_victim(srv, attack):
    """attack(ws) on one socket while a victim context speaks on another; the victim's messages."""
    async def run():
        async with connect(srv) as victim, connect(srv) as ws:
            await recv(victim), await recv(ws)
            await send(victim, p.Text("victim", "I am just speaking here, minding my own business.", seed=1))
            await attack(ws)
            await send(victim, p.End("victim"))
            await send(ws, p.Text("after", "Still usable.", seed=2), p.End("after"))
            assert isinstance((await collect(ws, ["after"]))["after"][-1], p.Done)
            return (await collect(victim, ["victim"]))["victim"]

    messages = asyncio.run(run())
    assert isinstance(messages[-1], p.Done) and messages[-1].audio_ms == FRAMES * 80
    wait_idle(srv)


def test_a_number_the_engine_cannot_take_ends_only_its_context(server):
    async def attack(ws):
        await ws.send('{"type":"text","context_id":"evil","text":"x","temperature":1e39}')
        await ws.send('{"type":"end","context_id":"evil"}')
        error = await answer(ws)
        assert (error.code, error.context_id, error.retryable) == (p.INVALID_REQUEST, "evil", False)
        assert "temperature" in error.message
        assert (await answer(ws)).code == p.CONTEXT_ENDED                  # the `end`: the id is spent
    with_victim(server, attack)


@pytest.mark.parametrize("field", ["voice", "language", "context_id", "text", "instruct"])
def test_a_lone_surrogate_is_answered_and_the_socket_stays_usable(server, field):
    async def attack(ws):
        raw = '{"type":"text","context_id":"s","text":"Hi","%s":"\\udcff"}' % field
        await ws.send(raw)
        error = await answer(ws)
        assert error.code == p.INVALID_MESSAGE and field in error.message
        assert error.context_id == (None if field == "context_id" else "s")
    with_victim(server, attack)


@pytest.mark.parametrize("raw, code", [
    ('{"type":[1],"context_id":"c"}', p.INVALID_MESSAGE),
    ('{"type":{"a":{"b":[]}},"context_id":"c"}', p.INVALID_MESSAGE),
    ('{"type":null}', p.INVALID_MESSAGE),
    ("[" * 30000 + "]" * 30000, p.INVALID_JSON),
    ('{"type":"text","context_id":"c","text":' + "[" * 20000 + "]" * 20000 + "}", p.INVALID_JSON),
    ('{"type":"cancel","context_id":"c","played_ms":1' + "0" * 400 + "}", p.INVALID_MESSAGE),
    ('{"type":"text","context_id":"c","text":"x","seed":1' + "0" * 40 + "}", p.INVALID_REQUEST),
])
def test_malformed_json_is_answered_and_the_socket_stays_usable(server, raw, code):
    async def attack(ws):
        await ws.send(raw)
        assert (await answer(ws)).code == code
    with_victim(server, attack)


@pytest.mark.parametrize("body, code", [
    ('{"input":"Hi","voice":"\\udcff"}', p.INVALID_REQUEST),
    ('{"input":"\\ud800 there"}', p.INVALID_REQUEST),
    ('{"input":' + "[" * 30000 + "]" * 30000 + "}", p.INVALID_JSON),
    ('{"input":"Hi","voice":["ryan"]}', p.INVALID_REQUEST),
    ("\xff\xfe", p.INVALID_JSON),
    ("[]", p.INVALID_REQUEST),
])
def test_http_errors_are_json_of_the_documented_shape(server, body, code):
    response = server.http.post("/v1/audio/speech", content=body.encode("utf-8", "surrogatepass"),
                                headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 400 and response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code and error["message"] and error["type"] == "invalid_request_error"


def test_error_replies_are_valid_utf8_whatever_they_echo():
    frame = p.encode(p.Error(p.UNKNOWN_VOICE, "unknown voice '\udcff'", False, "a\ud800"))
    frame.encode("utf-8")
    assert p.parse_server(frame) == p.Error(p.UNKNOWN_VOICE, "unknown voice '\udcff'", False, "a\ud800")


@contextlib.contextmanager
def logged_lines(names=("uvicorn.access", "uvicorn.error")):
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(handler.format(record))
    loggers = [logging.getLogger(name) for name in names]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield lines
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def test_the_api_key_never_reaches_the_logs(server):
    with logged_lines() as lines:
        assert server.http.get(f"/v1/voices?api_key={KEY}").status_code == 200
        assert server.http.get(f"/v1/voices?x=1&api_key={KEY}&y=2").status_code == 200
        assert server.http.get(f"/v1/voices?API_KEY={KEY}").status_code == 401      # (names are exact)

        async def run():
            async with connect(server) as ws:
                assert isinstance(await recv(ws), p.Ready)
        asyncio.run(run())
    assert len([line for line in lines if "api_key=***" in line.lower()]) >= 4, lines
    assert not any(KEY in line for line in lines), lines


def test_probes_stay_out_of_the_access_log_and_requests_do_not(server):
    with logged_lines(("uvicorn.access",)) as lines:
        for path in ("/health", "/metrics", "/health?x=1"):
            assert server.http.get(path).status_code in (200, 401)
        assert server.http.get("/v1/voices", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    assert any("/v1/voices" in line for line in lines), lines
    assert not any("/health" in line or "/metrics" in line for line in lines), lines
