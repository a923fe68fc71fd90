"""Property-based fuzzing of the WebSocket protocol and the HTTP API: for any input (every message type and field,
any JSON value and shape, any Unicode with lone surrogates, deep nesting) the answer is success or an error of the
documented shape, the socket stays open and answers, and a victim context on another socket still ends with `done`."""
import contextlib
import itertools
import json
import threading
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import connect

from engine import Engine
from gateway.app_state import GatewayConfig
from server_thread import ServerThread
from qwen_tts_client import protocol as p

pytestmark = pytest.mark.slow                # hypothesis: hundreds of examples against a server

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
CODES = {p.INVALID_JSON, p.UNKNOWN_TYPE, p.INVALID_MESSAGE, p.MESSAGE_TOO_LARGE, p.UNKNOWN_CONTEXT,
         p.DUPLICATE_CONTEXT, p.CONTEXT_ENDED, p.TOO_MANY_CONTEXTS, p.BUSY, p.CONTEXT_TIMEOUT, p.UNKNOWN_VOICE,
         p.UNKNOWN_LANGUAGE, p.INSTRUCT_NOT_SUPPORTED, p.MISSING_REFERENCE, p.EMPTY_TEXT, p.TEXT_TOO_LONG,
         p.INVALID_REQUEST, p.TOO_MUCH_PENDING_TEXT, p.GENERATION_FAILED}      # never internal: no server fault
EXAMPLES = itertools.count()
HTTP_CODES = CODES | {"unsupported_format", "invalid_audio", "voice_exists", "not_found"}

floats = st.floats(allow_subnormal=False)       # other tests' libraries may flush subnormals to zero
surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)     # JSON's \\udcff escapes make them
unicode = st.text(st.characters() | surrogates, max_size=40)
scalars = st.none() | st.booleans() | st.integers() | floats | unicode
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(unicode, inner,
                                                                                                    max_size=3),
                           max_leaves=8)
FIELDS = {"context_id": st.sampled_from(["a", "b", "*", "", "\udcff", "é" * 130]),
          "text": unicode | st.sampled_from(["Hello there.", " ", "x" * 6000]),
          "voice": st.sampled_from(["ryan", "vivian", "nobody"]), "language": st.sampled_from(["english", "klingon"]),
          "instruct": unicode, "word_timestamps": st.booleans(), "temperature": floats | st.integers(),
          "top_k": st.integers(), "top_p": floats, "repetition_penalty": floats | st.integers(),
          "seed": st.integers(), "played_ms": floats | st.integers()}
def typed(kinds):
    """Messages of these types with fields of their types (optional ones at random), on context a or b."""
    return st.sampled_from(kinds).flatmap(lambda kind: st.fixed_dictionaries(
        {"type": st.just(kind), "context_id": st.sampled_from(["a", "b"]), "text": FIELDS["text"]},
        optional={k: v for k, v in FIELDS.items() if k not in ("context_id", "text")}))


opening = st.fixed_dictionaries({"type": st.just("text"), "context_id": st.sampled_from(["a", "b"]),
                                 "text": st.sampled_from(["Hello there.", "Hi, "]) | unicode},
                                optional={"voice": st.sampled_from(["ryan", "vivian"]), "seed": st.integers(0, 99)})
mistyped = typed(list(p.CLIENT_MESSAGES)).flatmap(
    lambda m: st.sampled_from(sorted(m)).flatmap(lambda k: json_values.map(lambda v: {**m, k: v})))
shaped = typed(list(p.CLIENT_MESSAGES)) | mistyped
nested = st.integers(1, 20000).map(lambda n: '{"type":"text","context_id":"a","text":' + '{"a":' * n + "1" + "}" * n + "}")
wild = (st.fixed_dictionaries({"type": json_values}, optional={k: v | json_values for k, v in FIELDS.items()})
        | json_values).map(json.dumps) | st.text(max_size=60) | st.binary(max_size=64) | nested \
    | st.integers(1, 32000).map(lambda n: "[" * n + "]" * n)


@pytest.fixture(scope="module")
def server():
    engine = Engine.load(dummy="tiny", device="cpu", max_active=4).start()
    srv = ServerThread(engine, GatewayConfig(max_contexts_per_socket=2, max_frames=4)).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def victim(server):
    """Contexts one after the other on their own socket while the fuzzing runs: every one must end with `done`."""
    stop, endings = threading.Event(), []

    def speak():
        with connect(server.ws_url) as ws:
            ws.recv()
            while not stop.is_set():
                cid = f"v{len(endings)}"
                ws.send(p.encode(p.Text(cid, "The victim keeps on speaking.", seed=1)))
                ws.send(p.encode(p.End(cid)))
                msg = p.parse_server(ws.recv(30))
                while not p.ends_context(msg):
                    msg = p.parse_server(ws.recv(30))
                endings.append(msg)

    thread = threading.Thread(target=speak, daemon=True)
    thread.start()
    yield endings
    stop.set()
    thread.join(60)
    assert endings and all(isinstance(m, p.Done) for m in endings), [m for m in endings if not isinstance(m, p.Done)]


@pytest.fixture(scope="module")
def fuzz_socket(server, victim):
    """The socket and its server-side session."""
    with connect(server.ws_url, max_size=None) as ws:
        ready = p.parse_server(ws.recv())
        yield ws, next(s for s in server.gateway.sessions if s.id == ready.session_id)


def check(msg: p.ServerMessage) -> None:
    if isinstance(msg, p.Error):
        assert msg.code in CODES and msg.message and msg.retryable == (msg.code in p.RETRYABLE), msg
        assert msg.context_id is None or isinstance(msg.context_id, str)


@FUZZ
@given(st.lists(opening, max_size=2), st.lists(shaped, max_size=2), wild, st.lists(shaped, max_size=2))
def test_any_websocket_input_gets_a_documented_answer_and_keeps_the_socket(fuzz_socket, opened, before, frame, after):
    ws, session = fuzz_socket
    n = next(EXAMPLES)                                   # an id is spent once its context ends: fresh ones each time
    ids = {"a": f"a{n}", "b": f"b{n}"}
    shaped_frames = [json.dumps({**m, "context_id": ids[m["context_id"]]} if m.get("context_id") in ("a", "b") else m)
                     for m in opened + before + after]
    cut = len(opened) + len(before)
    for raw in [*shaped_frames[:cut], frame, *shaped_frames[cut:], *[p.encode(p.End(i)) for i in ids.values()]]:
        ws.send(raw)
    ws.send(p.encode(p.Keepalive("probe")))
    while True:                                          # the probe's answer: the socket still reads and answers
        msg = p.parse_server(ws.recv(60))
        check(msg)
        if isinstance(msg, p.Error) and msg.context_id == "probe":
            assert msg.code == p.UNKNOWN_CONTEXT
            break
    deadline = time.monotonic() + 60
    while session.contexts:                              # every context ends (each got an `end`)
        assert time.monotonic() < deadline
        with contextlib.suppress(TimeoutError):
            check(p.parse_server(ws.recv(0.05)))


speech_fields = {"input": unicode | st.sampled_from(["Hello there.", "", "x" * 6000]),
                 "voice": st.sampled_from(["ryan", "nobody"]), "response_format": st.sampled_from(["wav", "pcm", "mp3"]),
                 "stream": st.booleans(), "language": st.sampled_from(["english", "klingon"]), "instructions": unicode,
                 "model": unicode}
bodies = (st.fixed_dictionaries({}, optional={k: v | json_values for k, v in speech_fields.items()}).map(json.dumps)
          | json_values.map(json.dumps) | st.text(max_size=60) | st.integers(1, 30000).map(lambda n: "[" * n + "]" * n))


@FUZZ
@given(st.sampled_from(["/v1/audio/speech", "/v1/voices"]), bodies)
def test_any_http_body_gets_audio_or_a_documented_json_error(server, victim, path, body):
    response = httpx.post(server.url + path, content=body.encode("utf-8", "surrogatepass"), timeout=30)
    if response.status_code == 200:
        assert response.headers["content-type"] in ("audio/wav", "audio/pcm") and path == "/v1/audio/speech"
        return
    assert response.headers["content-type"] == "application/json" and response.status_code in (400, 409, 413, 503)
    error = response.json()["error"]
    assert error["code"] in HTTP_CODES and error["message"], error
