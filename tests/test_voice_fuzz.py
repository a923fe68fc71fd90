"""Property-based fuzzing of the voice registry and the OpenAI route on a Base model, as the WebSocket is fuzzed
(tests/test_gateway_fuzz.py): WAV headers that claim any rate, channel count, width or size, any name, transcript
and field of every type. Each answer is a documented 2xx or 4xx/503 (never a 500), /health stays 200, no file
appears outside the voices folder, and a victim stream on its own socket keeps its cadence."""
import base64
import threading
import time
from collections import Counter

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import connect

from engine import Engine
from engine.api import voice_input
from gateway.app_state import GatewayConfig
from server_thread import ServerThread
from test_gateway_fuzz import HTTP_CODES, floats, json_values, unicode
from qwen_tts_client import protocol as p
from wav_headers import wav_bytes

pytestmark = pytest.mark.slow                # hypothesis: hundreds of examples against a server

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
STATUSES: Counter = Counter()
MAX_GAP_S = 5.0             # the stalls were 2.7-13.9 s; a victim's gaps here are well under a second

hostile = ["victim", ".", "..", ".hidden", "../../outside/evil", "/etc/hostname", "a\x00b", "x" * 300]
names = st.from_regex(voice_input.VOICE_NAME, fullmatch=True) | unicode | st.sampled_from(hostile)
rates = st.sampled_from(voice_input.REFERENCE_RATES) | st.integers(0, 2 ** 32 - 1)
headers = st.builds(lambda rate, channels, width, seconds, claimed: wav_bytes(
    rate, min(int(seconds * min(rate, 48000)), 65536 // max(1, channels * width)), channels, width, claimed),
    rates, st.sampled_from([1, 2]) | st.integers(0, 70000), st.sampled_from([1, 2, 4]) | st.integers(0, 9),
    st.floats(0, 2, allow_subnormal=False), st.none() | st.integers(0, 2 ** 32 - 1))  # FTZ set by a library
wavs = headers | st.binary(max_size=64) | headers.flatmap(lambda w: st.integers(0, len(w)).map(lambda n: w[:n]))
valid_wavs = st.builds(lambda rate, channels, width, seconds: wav_bytes(rate, int(seconds * rate), channels, width),
                       st.sampled_from(voice_input.REFERENCE_RATES), st.sampled_from([1, 2]),
                       st.sampled_from([1, 2, 4]), st.floats(1, 1.5))
mine = st.sampled_from(["f1", "f2", "f3"])           # registered by the fuzz, deleted by it too
transcripts = st.none() | unicode | st.sampled_from(["A short reference.", "x" * voice_input.MAX_TRANSCRIPT_CHARS,
                                                      "x" * (voice_input.MAX_TRANSCRIPT_CHARS + 1)])
speech_fields = {"model": unicode, "input": unicode | st.sampled_from(["Hello there.", "", "x" * 6000]),
                 "voice": names | st.fixed_dictionaries({"id": names}), "speed": floats | st.integers() | st.none(),
                 "response_format": st.sampled_from(["mp3", "opus", "aac", "flac", "wav", "pcm", "ogg"]),
                 "stream": st.booleans() | st.none(), "stream_format": st.sampled_from(["audio", "sse", "chunks"]),
                 "language": st.sampled_from(["english", "auto", "klingon"]), "instructions": unicode}


def body(fields: dict) -> st.SearchStrategy:
    """Fields of their types (optional ones at random), each also any JSON value now and then."""
    return st.fixed_dictionaries({}, optional={k: v | json_values for k, v in fields.items()})


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("voices")
    engine = Engine.load(dummy="tiny-0.6B-Base", device="cpu", max_active=4, voices_dir=str(root)).start()
    srv = ServerThread(engine, GatewayConfig(max_frames=4)).start()
    victim = wav_bytes(16000, 16000, data=bytes(range(256)) * 125)
    httpx.post(srv.url + "/v1/voices", json={"name": "victim", "audio": base64.b64encode(victim).decode(),
                                             "x_vector_only": True}, timeout=60).raise_for_status()
    yield srv, root
    srv.stop()
    assert {200, 201, 204, 400} <= set(STATUSES), STATUSES      # the fuzz reached the success paths too
    assert [f.name for f in root.iterdir()] == [engine.voices.store.path.name]     # nothing beside the folder


@pytest.fixture(scope="module")
def victim(server):
    """Contexts one after the other on their own socket: each ends with `done`, no gap between its messages above
    MAX_GAP_S."""
    stop, endings, gaps = threading.Event(), [], []

    def speak():
        with connect(server[0].ws_url) as ws:
            ws.recv()
            while not stop.is_set():
                cid = f"v{len(endings)}"
                ws.send(p.encode(p.Text(cid, "The victim keeps on speaking.", voice="victim", seed=1)))
                ws.send(p.encode(p.End(cid)))
                last = time.monotonic()
                while not p.ends_context(msg := p.parse_server(ws.recv(30))):
                    gaps.append(time.monotonic() - last)
                    last = time.monotonic()
                endings.append(msg)

    thread = threading.Thread(target=speak, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(60)
    assert endings and all(isinstance(m, p.Done) for m in endings), [m for m in endings if not isinstance(m, p.Done)]
    assert max(gaps) < MAX_GAP_S, max(gaps)


def check(srv, response: httpx.Response, ok: tuple[int, ...]) -> None:
    STATUSES[response.status_code] += 1
    assert response.status_code in ok + (400, 404, 409, 413, 503), (response.status_code, response.text[:300])
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error["code"] in HTTP_CODES | {p.BUSY} and error["message"], error
    assert httpx.get(srv.url + "/health", timeout=30).status_code == 200


def b64(wav: bytes) -> str:
    return base64.b64encode(wav).decode()


@FUZZ
@given(st.fixed_dictionaries({"name": mine | names, "audio": valid_wavs.map(b64), "text": transcripts,
                              "x_vector_only": st.booleans()})
       | body({"name": names, "audio": wavs.map(b64) | unicode, "text": transcripts, "x_vector_only": st.booleans()}))
def test_any_registration_gets_a_documented_answer(server, victim, fields):
    srv = server[0]
    raw = p.to_json(fields).encode("utf-8", "surrogatepass")
    check(srv, httpx.post(srv.url + "/v1/voices", content=raw, timeout=60), (201,))


@FUZZ
@given(mine | names.filter(lambda name: name and name != "victim"))
def test_any_deletion_gets_a_documented_answer(server, victim, name):
    srv = server[0]
    path = "".join(f"%{b:02X}" for b in name.encode("utf-8", "surrogatepass"))     # '.' and '..' as they are
    check(srv, httpx.delete(f"{srv.url}/v1/voices/{path}"), (204,))


@FUZZ
@given(st.fixed_dictionaries({"input": st.just("Hello there."), "voice": st.just("victim")},
                             optional={k: speech_fields[k] for k in ("response_format", "stream", "stream_format")})
       | body(speech_fields))
def test_any_speech_request_gets_audio_or_a_documented_error(server, victim, fields):
    srv = server[0]
    raw = p.to_json(fields).encode("utf-8", "surrogatepass")
    check(srv, httpx.post(srv.url + "/v1/audio/speech", content=raw, timeout=60), (200,))
