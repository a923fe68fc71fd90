"""The vendors' own SDKs, unchanged, against a real gateway on loopback (tiny dummy engine and aligner): Cartesia's
WebSocket contexts (its `websocket_base_url`), ElevenLabs' `convert_realtime` (stream-input: it always speaks wss://,
so this gateway serves TLS with a certificate the test trusts)."""
import asyncio
import base64
import shutil
import subprocess

import pytest

pytest.importorskip("cartesia")
pytest.importorskip("elevenlabs")

from cartesia import AsyncCartesia  # noqa: E402
from elevenlabs.client import ElevenLabs  # noqa: E402

import gateway_harness  # noqa: E402
from integration_helpers import FRAMES, KEY, PIECES, server, wait_until  # noqa: E402,F401  (server: a fixture)

pytestmark = pytest.mark.slow                # the vendors' SDKs, a TLS gateway

TEXT = "".join(PIECES)


def test_cartesia_sdk_contexts_speak_stream_timestamps_and_cancel(server):
    fmt = {"container": "raw", "encoding": "pcm_f32le", "sample_rate": 44100}

    async def run():
        client = AsyncCartesia(api_key=KEY, base_url=server.url, websocket_base_url=server.url.replace("http", "ws"))
        async with client.tts.websocket_connect() as connection:
            spoken = connection.context(model_id="sonic-3", voice={"mode": "id", "id": "ryan"}, output_format=fmt,
                                        add_timestamps=True, language="en")
            for piece in PIECES:
                await spoken.push(piece)
            await spoken.no_more_inputs()
            events = [event async for event in spoken.receive()]
            cut = connection.context(model_id="sonic-3", voice={"mode": "id", "id": "ryan"}, output_format=fmt)
            await cut.push("This context is cancelled before it is spoken to its end.")
            await cut.cancel()
            await wait_until(server.idle, 5)
        await client.close()
        return events

    before = server.state()["audio_samples"]
    events = asyncio.run(run())
    generated = server.state()["audio_samples"] - before                # both contexts' (24 kHz)
    kinds = [e.type for e in events]
    assert kinds[0] == "chunk" and kinds[-1] == "done" and "timestamps" in kinds
    audio = b"".join(base64.b64decode(e.data) for e in events if e.type == "chunk")
    assert 0 < len(audio) <= 4 * round(generated * 44100 / 24000)             # float32 at 44.1 kHz
    words = [w for e in events if e.type == "timestamps" for w in e.word_timestamps.words]
    assert words == TEXT.split()


@pytest.fixture()
def tls_server(tmp_path, monkeypatch):
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed to make the test's certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    srv = gateway_harness.loaded(max_frames=FRAMES)
    srv.server.config.ssl_certfile, srv.server.config.ssl_keyfile = str(cert), str(key)
    srv.thread.start()
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))              # what the SDK's default TLS context trusts
    asyncio.run(wait_until(lambda: srv.gateway.status == "ready", 120))
    yield srv
    srv.stop()


def test_elevenlabs_sdk_convert_realtime_streams_text_in_and_audio_out(tls_server):
    client = ElevenLabs(api_key=KEY, base_url=f"https://127.0.0.1:{tls_server.port}")
    audio = b"".join(client.text_to_speech.convert_realtime(voice_id="ryan", text=iter(PIECES), model_id="any_model",
                                                            output_format="ulaw_8000"))
    generated = tls_server.gateway.metrics.audio_samples                    # 24 kHz; the dummy may end before the cap
    assert 0 < generated <= FRAMES * 1920 and len(audio) == -(-generated // 3)   # one mu-law byte a sample
    asyncio.run(wait_until(lambda: not tls_server.gateway.sessions, 5))       # the server closed it after isFinal
    assert tls_server.gateway.open_contexts == 0
    with pytest.raises(Exception, match="HTTP 400"):                        # refused at the handshake
        b"".join(client.text_to_speech.convert_realtime(voice_id="nobody", text=iter(PIECES),
                                                        output_format="pcm_24000"))
