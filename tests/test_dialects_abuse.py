"""Bad input on the dialects' sockets: each gets the dialect's error, the socket stays usable, nothing crashes."""
import asyncio
import json

import pytest
import websockets

from integration_helpers import KEY, server, wait_until  # noqa: F401  (server: a fixture, a gateway with words)

CARTESIA = {"model_id": "sonic-3", "voice": {"mode": "id", "id": "ryan"}, "add_timestamps": False,
            "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 16000}}


async def replies(ws, until, limit: float = 20.0) -> list[dict]:
    out = []
    while not out or not until(out[-1]):
        out.append(json.loads(await asyncio.wait_for(ws.recv(), limit)))
    return out


def test_cartesia_bad_messages_get_errors_and_the_socket_speaks_on(server):  # noqa: F811
    async def run():
        url = server.url.replace("http", "ws") + "/tts/websocket"
        async with websockets.connect(url, additional_headers={"X-API-Key": KEY}) as ws:
            got = []
            for frame in (b"\x00\x01", "not json", "[]", json.dumps({**CARTESIA, "context_id": "a", "transcript": 5}),
                          json.dumps({**CARTESIA, "context_id": "b", "transcript": "Hi.",
                                      "output_format": {"container": "mp3", "encoding": "mp3", "sample_rate": 44100}}),
                          json.dumps({**CARTESIA, "context_id": "c", "transcript": "Hi.", "voice": {"id": "nobody"}}),
                          json.dumps({"context_id": "never", "cancel": True})):
                await ws.send(frame)
                if "never" not in str(frame):
                    got += await replies(ws, lambda m: m["type"] == "error")
            await ws.send(json.dumps({**CARTESIA, "context_id": "d", "transcript": "Hello there.", "continue": False}))
            other = {**CARTESIA, "output_format": {**CARTESIA["output_format"], "sample_rate": 24000}}
            await ws.send(json.dumps({**other, "context_id": "e", "transcript": "Hi.", "continue": False}))
            spoken = await replies(ws, lambda m: m["type"] == "done")
            return got, spoken

    got, spoken = asyncio.run(run())
    assert [(m["error_code"], m["context_id"]) for m in got] == [
        ("invalid_message", None), ("invalid_json", None), ("invalid_message", None), ("invalid_message", "a"),
        ("invalid_parameter", "b"), ("unknown_voice", "c")]
    assert all(m["status_code"] == 400 and m["done"] for m in got)
    assert any(m["type"] == "chunk" and m["context_id"] == "d" for m in spoken)
    assert [m["error_code"] for m in spoken if m["type"] == "error"] == ["invalid_parameter"]     # one format a socket
    asyncio.run(wait_until(server.idle, 5))
    assert "internal" not in server.state()["errors"]


def test_elevenlabs_bad_input_is_refused_or_answered_and_the_socket_speaks_on(server):  # noqa: F811
    base = server.url.replace("http", "ws") + "/v1/text-to-speech/ryan/multi-stream-input"

    async def run():
        with pytest.raises(websockets.InvalidStatus, match="400"):
            await websockets.connect(f"{base}?output_format=opus_48000_64", additional_headers={"xi-api-key": KEY})
        with pytest.raises(websockets.InvalidStatus, match="401"):
            await websockets.connect(f"{base}?output_format=pcm_16000", additional_headers={"xi-api-key": "wrong"})
        async with websockets.connect(f"{base}?output_format=pcm_16000&model_id=eleven_flash_v2_5",
                                      additional_headers={"xi-api-key": KEY}) as ws:
            assert ws.response.headers["x-served-model"] == "dummy:tiny"            # any model_id is accepted
            await ws.send(json.dumps({"context_id": "gone", "close_context": True}))     # unknown: nothing
            await ws.send(json.dumps({"text": ""}))                                      # keep-alive: nothing
            await ws.send(json.dumps({"context_id": "a", "text": 7}))
            bad = await replies(ws, lambda m: "error" in m)
            await ws.send(json.dumps({"context_id": "b", "text": "Hello there. ", "flush": True}))
            await ws.send(json.dumps({"context_id": "b", "close_context": True}))
            spoken = await replies(ws, lambda m: m.get("isFinal"))
            return bad, spoken

    bad, spoken = asyncio.run(run())
    assert bad == [{"message": "text must be a string", "error": "invalid_message", "code": 1008, "contextId": "a"}]
    assert any(m.get("audio") for m in spoken) and spoken[-1] == {"isFinal": True, "contextId": "b"}
    chars = "".join(c for m in spoken if m.get("alignment") for c in m["alignment"]["chars"])
    assert chars == "Hello there. "                                  # every character, the init's and flush's too
