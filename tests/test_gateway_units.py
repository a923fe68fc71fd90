"""Protocol schemas, audio conversion and the outbox, without a server."""
import asyncio
import json

import numpy as np
import orjson
import pytest

from gateway.audio import AudioEncoder, Resampler, mulaw_to_pcm16, to_mulaw, to_pcm16
from gateway.outbox import Outbox
from qwen_tts_client import protocol as p
from qwen_tts_client.protocol import json_frames
from fake_clock import FakeClock


@pytest.fixture(params=["orjson", "json"])
def piece_parser(request, monkeypatch):
    """The usual piece read by orjson (the gateway's), or by json (a client package without orjson)."""
    assert json_frames.piece_loads is orjson.loads
    if request.param == "json":
        monkeypatch.setattr(json_frames, "piece_loads", json.loads)


@pytest.mark.parametrize("raw, code, context_id", [
    ("not json", p.INVALID_JSON, None),
    ("[1]", p.INVALID_MESSAGE, None),
    ('{"type": "speak", "context_id": "a"}', p.UNKNOWN_TYPE, "a"),
    ('{"type": "text", "text": "hi"}', p.INVALID_MESSAGE, None),
    ('{"type": "text", "context_id": "a", "text": 5}', p.INVALID_MESSAGE, "a"),
    ('{"type": "text", "context_id": "a", "text": "x", "top_k": true}', p.INVALID_MESSAGE, "a"),
    ('{"type": "text", "context_id": "a", "text": "x", "temperature": "hot"}', p.INVALID_MESSAGE, "a"),
    ('{"type": [1], "context_id": "a"}', p.INVALID_MESSAGE, "a"),
    ('{"type": {"text": 1}}', p.INVALID_MESSAGE, None),
    ("[" * 30000 + "]" * 30000, p.INVALID_JSON, None),
    ('{"type": "text", "context_id": "\\udcff", "text": "x"}', p.INVALID_MESSAGE, None),
    ('{"type": "text", "context_id": "a", "text": "x", "voice": "\\udcff"}', p.INVALID_MESSAGE, "a"),
    ('{"type": "cancel", "context_id": "a", "played_ms": 1' + "0" * 400 + "}", p.INVALID_MESSAGE, "a"),
    ('{"type": "flush", "context_id": "*"}', p.INVALID_MESSAGE, None),
    ('{"type": "end", "context_id": ""}', p.INVALID_MESSAGE, None),
    ('{"type": "cancel", "context_id": "a", "played_ms": -1}', p.INVALID_MESSAGE, "a"),
    ('{"type": "cancel", "context_id": "a", "played_ms": NaN}', p.INVALID_MESSAGE, "a"),
    ('{"type": "text", "context_id": "*", "text": "x"}', p.INVALID_MESSAGE, None),      # the 3-field pieces' path
    ('{"type": "text", "context_id": "a", "text": 5}', p.INVALID_MESSAGE, "a"),
    ('{"type": "text", "context_id": "a", "text": "\\udcff"}', p.INVALID_MESSAGE, "a"),
    ('{"type": "text", "context_id": "' + "x" * 256 + '", "text": "y"}', p.INVALID_MESSAGE, None),
    ('{"type": "text", "context_id": "a", "end": true}', p.INVALID_MESSAGE, "a"),
])
def test_bad_client_messages_get_their_codes(raw, code, context_id, piece_parser):
    with pytest.raises(p.ProtocolError) as info:
        p.parse_client(raw)
    assert (info.value.code, info.value.context_id) == (code, context_id)


def test_client_messages_round_trip():
    for msg in [p.Text("a", "Hello", voice="ryan", temperature=0.7, seed=3), p.Flush("a"), p.End("a"),
                p.Cancel("*", 120.0), p.Keepalive(), p.Keepalive("a")]:
        assert p.parse_client(p.encode(msg)) == msg
    assert p.parse_client('{"type": "text", "context_id": "a", "text": "x", "future_field": 1}') == p.Text("a", "x")
    assert p.parse_client('{"type": "text", "context_id": "é", "text": "x"}') == p.Text("é", "x")


PIECES = ['{"type":"text","context_id":"a","text":"x"}',
          '{"text":"\\ud83d\\ude00 \\n\\"q\\"\\u00e9","type":"text","context_id":"é"}',
          ' { "type" : "text" , "context_id" : "\\u0061" , "text" : "" } ',
          '{"type":"text","context_id":"a","text":"x","text":"y"}',
          '{"type":"text","context_id":"a","text":"x","context_id":"b"}',
          '{"type":"text","context_id":"a","text":"\\u2028\\t"}']


def test_pieces_parse_alike_by_orjson_and_json(monkeypatch):
    by_orjson = [p.parse_client(raw) for raw in PIECES]
    monkeypatch.setattr(json_frames, "piece_loads", json.loads)
    assert [p.parse_client(raw) for raw in PIECES] == by_orjson
    assert by_orjson[1] == p.Text("é", '\U0001f600 \n"q"é') and by_orjson[3:5] == [p.Text("a", "y"), p.Text("b", "x")]


def test_client_messages_hold_only_fields_that_differ_from_their_defaults():
    assert p.encode(p.Text("a", "x")) == '{"type":"text","context_id":"a","text":"x"}'
    assert p.encode(p.Text("a", "x", word_timestamps=False, end=True, seed=0)) == \
        '{"type":"text","context_id":"a","text":"x","word_timestamps":false,"seed":0,"end":true}'
    assert p.encode(p.Keepalive()) == '{"type":"keepalive"}'
    assert p.encode(p.Error(p.BUSY, "later")) == \
        '{"type":"error","code":"busy","message":"later","retryable":false,"context_id":null}'    # every field


def test_server_messages_round_trip_and_binary_audio_header():
    for msg in [p.Ready("s", 16000, "mulaw", 4, ["ryan"]), p.Flushed("a", 2), p.Done("a", 960.0),
                p.Cancelled("a", 80.0, 160.0), p.Error(p.BUSY, "later", True, "a"),
                p.Words("a", ["hi"], [0.0], [0.3], [0], [2]), p.Audio("a", 1, 1920, b"\x01\x02")]:
        assert p.parse_server(p.encode(msg)) == msg
    frame = p.pack_audio("ctx-é", 7, 48000, b"\xff\x00")
    assert frame[:2] == bytes((1, len("ctx-é".encode()))) and frame[-2:] == b"\xff\x00"
    assert frame[2 + frame[1]:2 + frame[1] + 8] == (7).to_bytes(4, "little") + (48000).to_bytes(4, "little")
    assert p.parse_server(frame) == p.Audio("ctx-é", 7, 48000, b"\xff\x00")


def test_stream_format_query():
    assert p.StreamFormat.from_query({}) == p.StreamFormat(24000, "pcm_s16le", "binary")
    fmt = p.StreamFormat(8000, "mulaw", "base64")
    assert p.StreamFormat.from_query(fmt.to_query()) == fmt
    for bad in [{"sample_rate": "44100"}, {"sample_rate": "x"}, {"encoding": "flac"}, {"audio_format": "hex"}]:
        with pytest.raises(p.ProtocolError, match="must be one of"):
            p.StreamFormat.from_query(bad)


@pytest.mark.parametrize("rate", [16000, 8000])
def test_resampling_is_the_same_in_any_chunking(rate):
    rng = np.random.default_rng(rate)
    x = (0.3 * rng.standard_normal(1920 * 5)).astype(np.float32)
    whole = Resampler(rate)
    expected = np.concatenate([whole.push(x), whole.finish()])
    assert len(expected) == len(x) * rate // 24000
    chunked, pieces, i = Resampler(rate), [], 0
    while i < len(x):
        n = int(rng.integers(1, 2500))
        pieces.append(chunked.push(x[i:i + n]))
        i += n
    pieces.append(chunked.finish())
    assert np.array_equal(np.concatenate(pieces), expected)
    assert np.array_equal(np.concatenate([chunked.push(x), chunked.finish()]), expected)   # reusable after finish


@pytest.mark.parametrize("rate", [16000, 8000])
def test_resampling_keeps_the_band_and_removes_aliases(rate):
    t = np.arange(24000) / 24000
    r = Resampler(rate)
    tone = np.concatenate([r.push(np.sin(2 * np.pi * 1000 * t).astype(np.float32)), r.finish()])
    expected = np.sin(2 * np.pi * 1000 * np.arange(len(tone)) / rate)
    assert np.abs(tone - expected)[100:-100].max() < 1e-3
    alias = np.concatenate([r.push(np.sin(2 * np.pi * (rate / 2 + 1500) * t).astype(np.float32)), r.finish()])
    assert np.abs(alias[100:-100]).max() < 1e-3


def test_encodings():
    x = np.linspace(-1.2, 1.2, 4001).astype(np.float32)
    assert np.array_equal(mulaw_to_pcm16(to_mulaw(np.zeros(1, np.float32))), [0])
    decoded = mulaw_to_pcm16(to_mulaw(x))
    assert np.abs(decoded.astype(np.int32) - to_pcm16(x)).max() <= 1024          # mu-law steps are at most 1024
    [(data, samples)] = AudioEncoder(8000, "mulaw").encode(x[:3000], final=True)
    assert len(data) == samples == 1000


class Socket:
    """A WebSocket stand-in: records what is written; `fail` makes writes raise, `stall` makes them wait."""

    def __init__(self, fail: bool = False, stall: bool = False):
        self.sent, self.closed, self.fail, self.stall = [], None, fail, stall

    async def send_text(self, frame):
        if self.stall:
            await asyncio.sleep(3600)
        if self.fail:
            raise RuntimeError("cannot send")
        self.sent.append(frame)

    send_bytes = send_text

    async def close(self, code, reason=""):
        self.closed = code


def test_the_outbox_writes_in_order_closes_after_a_failed_write_and_sees_a_stalled_client():
    async def run():
        ok, failing, stalled, clock = Socket(), Socket(fail=True), Socket(stall=True), FakeClock()
        box = Outbox(ok, 1.0, 1000, clock)
        box.put("one"), box.put(b"two")
        await box.close(p.CLOSE_GOING_AWAY, "bye")
        broken = Outbox(failing, 1.0, 1000, clock)
        broken.put("lost")
        await asyncio.wait_for(broken.finished.wait(), 30)
        slow = Outbox(stalled, 0.2, 1000, clock)
        assert slow.put("first")
        clock.advance(0.2)
        assert not slow.too_slow(clock.monotonic())
        clock.advance(0.1)
        late = slow.put("second")
        big = Outbox(stalled, 10.0, 100, clock).put("x" * 200)
        return ok, failing, late, big

    ok, failing, late, big = asyncio.run(run())
    assert ok.sent == ["one", b"two"] and ok.closed == p.CLOSE_GOING_AWAY
    assert failing.closed == p.CLOSE_INTERNAL and not failing.sent                # never a silent socket
    assert late is False and big is False


def test_the_aligner_timeout_follows_the_engine_s_device_unless_set():
    from types import SimpleNamespace

    from gateway.app_state import Gateway, GatewayConfig
    on = {device: SimpleNamespace(info={"device": device}, on_failure=None) for device in ("cuda", "cpu")}
    assert Gateway(GatewayConfig(), on["cuda"]).aligner_timeout == 5.0
    assert Gateway(GatewayConfig(), on["cpu"]).aligner_timeout == 60.0      # the published aligner: ~17 s a job
    assert Gateway(GatewayConfig(aligner_timeout=2.5), on["cpu"]).aligner_timeout == 2.5


def test_front_ends_read_each_others_reports_but_not_their_own_or_stale_ones(tmp_path):
    import os
    import time

    from gateway.frontend_reports import STALE_S, FrontendReports
    address = f"ipc://{tmp_path}/engine"
    a, b, gone = (FrontendReports(address, name) for name in ("a", "b", "gone"))
    a.publish({"sockets": 1})
    b.publish({"sockets": 2})
    gone.publish({"sockets": 3})
    old = time.time() - STALE_S - 1
    os.utime(gone.mine, (old, old))                  # a front end that stopped reporting
    assert a.others() == [{"sockets": 2}] and b.others() == [{"sockets": 1}]
    b.withdraw()
    assert a.others() == [] and sorted(p.name for p in tmp_path.iterdir()) == ["frontend-a.json", "frontend-gone.json"]


def test_a_front_end_whose_report_could_not_be_written_once_goes_on_reporting(tmp_path, monkeypatch):
    """A full disk for a moment must not end its reports for good: every other front end's /health waits for them."""
    from types import SimpleNamespace

    from gateway.app_state import Gateway, GatewayConfig
    engine = SimpleNamespace(address=f"ipc://{tmp_path}/engine", identity=b"me", info={}, on_failure=None)
    gateway, written, real_sleep = Gateway(GatewayConfig(workers=2), engine), [], asyncio.sleep

    def publish(report: dict) -> None:
        written.append(report)
        if len(written) == 1:
            raise OSError(28, "No space left on device")

    async def run():
        task = asyncio.create_task(gateway._report())
        for _ in range(1000):
            await real_sleep(0)
            if len(written) >= 3 or task.done():
                break
        task.cancel()
    gateway.reports.publish = publish
    monkeypatch.setattr("gateway.app_state.asyncio.sleep", lambda _: real_sleep(0))      # its second passes at once
    asyncio.run(run())
    assert len(written) >= 3 and written[-1]["sockets"] == 0
