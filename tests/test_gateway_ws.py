"""Protocol v1 end to end: a real uvicorn server on loopback, the tiny dummy engine, a real `websockets` client."""
import asyncio
from typing import Callable
from urllib.parse import urlencode

import av
import numpy as np
import pytest
import websockets

from engine import Engine, SamplingParams, SynthesisRequest
from gateway.audio import AudioEncoder, mulaw_to_pcm16
from gateway.app_state import GatewayConfig
from fake_clock import FakeClock
from server_thread import ServerThread
from qwen_tts_client import protocol as p
from qwen_tts_client.client import GatewayClient
from qwen_tts_client.connection import Endpoint
from ws_helpers import collect, recv, send, wait_idle

KEY = "test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
FRAMES = 12


@pytest.fixture(scope="module")
def server():
    engine = Engine.load(dummy="tiny", device="cpu", max_active=4).start()
    config = GatewayConfig(api_keys=(KEY,), max_sockets=4, max_contexts_per_socket=3,
                           context_timeout=2.0, max_frames=FRAMES)
    srv = ServerThread(engine, config, clock=FakeClock()).start()    # its timeouts pass only when a test says
    yield srv
    srv.stop()


def connect(srv, headers=AUTH, **query):
    return websockets.connect(srv.ws_url + (f"?{urlencode(query)}" if query else ""), additional_headers=headers)


def audio_of(messages, bytes_per_sample: int = 2) -> bytes:
    """The context's audio, checking seq and sample_offset continuity."""
    audio = [m for m in messages if isinstance(m, p.Audio)]
    assert [m.seq for m in audio] == list(range(len(audio)))
    offsets = np.cumsum([0] + [len(m.data) // bytes_per_sample for m in audio])
    assert [m.sample_offset for m in audio] == offsets[:-1].tolist()
    return b"".join(m.data for m in audio)


def engine_audio(srv, text: str, seed: int, rate: int = 24000, encoding: str = "pcm_s16le", voice="ryan",
                 non_streaming_text: bool = False) -> Callable[[], bytes]:
    """The same request run on the engine directly, converted as the socket converts it: submitted now, to run in one
    batch with what the test runs next; the returned function waits for its audio."""
    request = SynthesisRequest(text=text, voice=voice, max_frames=FRAMES, sampling=SamplingParams(seed=seed),
                               non_streaming_text=non_streaming_text)
    encoder, handle = AudioEncoder(rate, encoding), srv.engine.submit(request)
    return lambda: b"".join(data for c in handle.iter_blocking() for data, _ in encoder.encode(c.pcm, c.final))


def assert_same_audio(got: bytes, expected: bytes, encoding: str = "pcm_s16le") -> None:
    """Equal up to float rounding: batched and single runs sample the same codes, their float sums differ slightly."""
    decode = {"pcm_s16le": lambda b: np.frombuffer(b, "<i2"), "mulaw": mulaw_to_pcm16, "alaw": alaw_to_pcm16}[encoding]
    got, expected = decode(got).astype(np.int32), decode(expected).astype(np.int32)
    tolerance = 64 if encoding == "pcm_s16le" else 1024                   # 1024: one mu-law or A-law step, at most
    assert len(got) == len(expected) and np.abs(got - expected).max() <= tolerance


def decoded(codec: str, packets: list[bytes], rate: int) -> list[np.ndarray]:
    """Each packet decoded by FFmpeg (PyAV)."""
    decoder = av.CodecContext.create(codec, "r")
    decoder.sample_rate, decoder.layout = rate, "mono"
    return [np.concatenate([f.to_ndarray().reshape(-1) for f in decoder.decode(av.Packet(data))]) for data in packets]


def alaw_to_pcm16(data: bytes) -> np.ndarray:
    return decoded("pcm_alaw", [data], 8000)[0]


def test_streamed_text_speaks_before_end_and_matches_the_engine(server):
    pieces = ["Hel", "lo th", "ere, how", " are you do", "ing today?"]

    async def run():
        async with connect(server) as ws:
            ready = await recv(ws)
            assert (ready.protocol, ready.sample_rate, ready.encoding, ready.max_contexts) == (1, 24000, "pcm_s16le", 3)
            assert "ryan" in ready.voices and ready.session_id
            await send(ws, p.Text("a", pieces[0], voice="ryan", seed=7), *[p.Text("a", t) for t in pieces[1:]])
            first = await recv(ws)
            assert isinstance(first, p.Audio) and first.context_id == "a"      # before `end` was sent
            await send(ws, p.End("a"))
            rest = (await collect(ws, ["a"]))["a"]
            return [first] + rest

    expected = engine_audio(server, "".join(pieces), seed=7)
    messages = asyncio.run(run())
    audio = audio_of(messages)
    assert isinstance(messages[-1], p.Done) and messages[-1].audio_ms == len(audio) / 2 / 24
    assert len(audio) == FRAMES * 1920 * 2
    assert_same_audio(audio, expected())
    wait_idle(server)


def test_a_first_text_that_ends_its_context_takes_the_whole_text_layout(server):
    text = "Hello there, how are you doing today?"
    first = dict(voice="ryan", seed=5)
    contexts = {            # messages -> the layout (tiny is a CustomVoice: its default puts all text in the prompt)
        "one-message": ([p.Text("one-message", text, **first, end=True)], True),
        "then-end": ([p.Text("then-end", text, **first), p.End("then-end")], False),
        "streamed": ([p.Text("streamed", text[:9], **first), p.Text("streamed", text[9:], end=True)], False),
        "forced-streaming": ([p.Text("forced-streaming", text, **first, text_layout="streaming", end=True)], False),
        "forced-whole": ([p.Text("forced-whole", text[:9], **first, text_layout="whole"),
                          p.Text("forced-whole", text[9:]), p.End("forced-whole")], True),
    }

    async def run(ids):            # side by side on one socket (max_contexts_per_socket)
        async with connect(server) as ws:
            await recv(ws)
            for cid in ids:
                await send(ws, *contexts[cid][0])
            return await collect(ws, ids)

    whole, streaming = (engine_audio(server, text, 5, non_streaming_text=layout) for layout in (True, False))
    whole, streaming = whole(), streaming()
    assert whole != streaming
    for ids in (list(contexts)[:3], list(contexts)[3:]):
        wait_idle(server)                                           # max_active: the engine's slots are free
        for cid, got in asyncio.run(run(ids)).items():
            assert isinstance(got[-1], p.Done), (cid, got[-1])
            assert_same_audio(audio_of(got), whole if contexts[cid][1] else streaming)
    with pytest.raises(p.ProtocolError, match="text_layout"):
        p.parse_client(p.encode(p.Text("x", "Hi", text_layout="batch")))

    async def client_speaks_whole():             # the Python client's one-message whole text
        client = GatewayClient(Endpoint(server.ws_url, KEY))
        ctx = await client.open_context(voice="ryan", seed=5)
        await ctx.text(text, end=True)
        messages = [await ctx.receive(30)]
        while not p.ends_context(messages[-1]):
            messages.append(await ctx.receive(30))
        await client.aclose()
        return messages

    assert_same_audio(audio_of(asyncio.run(client_speaks_whole())), whole)
    wait_idle(server)


def test_flush_continues_offsets_across_utterances_at_16k(server):
    async def run():
        async with connect(server, sample_rate=16000) as ws:
            assert (await recv(ws)).sample_rate == 16000
            await send(ws, p.Text("a", "Hello there.", voice="ryan", seed=3), p.Flush("a"), p.Flush("a"),
                       p.Text("a", " How are you?"), p.End("a"))
            return (await collect(ws, ["a"]))["a"]

    expected = [engine_audio(server, text, 3, 16000) for text in ("Hello there.", " How are you?")]
    messages = asyncio.run(run())
    kinds = [type(m).__name__ for m in messages]
    first_flush = kinds.index("Flushed")
    assert kinds[first_flush:first_flush + 2] == ["Flushed", "Flushed"] and kinds[-1] == "Done"
    assert [m.flush_id for m in messages if isinstance(m, p.Flushed)] == [1, 2]
    audio = audio_of(messages)
    first = audio_of(messages[:first_flush])
    assert_same_audio(first, expected[0]())
    assert_same_audio(audio[len(first):], expected[1]())
    assert len(audio) == 2 * FRAMES * 1280 * 2 and messages[-1].audio_ms == 2 * FRAMES * 80


def test_base64_mulaw_at_8k(server):
    async def run():
        async with connect(server, sample_rate=8000, encoding="mulaw", audio_format="base64") as ws:
            assert (await recv(ws)).encoding == "mulaw"
            await send(ws, p.Text("m", "Good morning.", seed=5), p.End("m"))
            return (await collect(ws, ["m"]))["m"]

    expected = engine_audio(server, "Good morning.", 5, 8000, "mulaw", voice=None)
    messages = asyncio.run(run())
    assert messages[-1].audio_ms == FRAMES * 80
    assert_same_audio(audio_of(messages, 1), expected(), "mulaw")


def test_opus_packets_and_alaw(server):
    """opus: every binary frame one 20 ms packet, which `ready` says; each utterance encoded on its own."""
    async def run(encoding):
        async with connect(server, encoding=encoding) as ws:
            ready = await recv(ws)
            await send(ws, p.Text("o", "Good morning.", seed=5), p.Flush("o"), p.Text("o", " Again."), p.End("o"))
            return ready, (await collect(ws, ["o"]))["o"]

    async def both():
        return await asyncio.gather(run("opus"), run("alaw"))

    expected = engine_audio(server, "Good morning.", 5, encoding="alaw", voice=None)
    (ready, messages), alaw = asyncio.run(both())
    packets = [m for m in messages if isinstance(m, p.Audio)]
    assert (ready.encoding, ready.packet_ms) == ("opus", 20) and isinstance(messages[-1], p.Done)
    assert [m.sample_offset for m in packets] == [480 * i for i in range(len(packets))]
    assert [len(pcm) for pcm in decoded("libopus", [m.data for m in packets], 48000)] == [960] * len(packets)
    assert 2 * FRAMES * 1920 < 480 * len(packets) <= 2 * (FRAMES * 1920 + 2 * 480)    # lookahead and last packet
    assert messages[-1].audio_ms == 20 * len(packets)
    ready, messages = alaw
    audio = audio_of(messages, 1)
    first = audio_of(messages[:[type(m) for m in messages].index(p.Flushed)], 1)
    assert (ready.encoding, ready.packet_ms, len(audio)) == ("alaw", None, 2 * FRAMES * 1920)
    assert_same_audio(first, expected(), "alaw")
    wait_idle(server)


def test_contexts_interleave_and_cancel_leaves_the_others_intact(server):
    texts = {"a": "The first context speaks.", "c": "And the third one too."}

    async def run():
        async with connect(server) as ws:
            await recv(ws)
            await send(ws, p.Text("a", texts["a"], seed=1), p.Text("b", "The second one is cut", seed=2),
                       p.Text("c", texts["c"], seed=3), p.End("a"), p.End("c"))
            log = []
            while not any(isinstance(m, p.Audio) and m.context_id == "b" for m in log):
                log.append(await recv(ws))
            await send(ws, p.Cancel("b", played_ms=40))
            await collect(ws, ["a", "b", "c"], log)
            return log

    log = asyncio.run(run())
    expected = {i: engine_audio(server, texts[i], seed, voice=None) for i, seed in (("a", 1), ("c", 3))}
    by_id = {i: [m for m in log if m.context_id == i] for i in "abc"}
    cancelled = by_id["b"][-1]
    assert isinstance(cancelled, p.Cancelled) and cancelled.played_ms == 40
    assert cancelled.generated_ms >= 80 and cancelled.spoken_text is None
    assert not any(m.context_id == "b" for m in log[log.index(cancelled) + 1:])
    for i, seed in (("a", 1), ("c", 3)):
        assert isinstance(by_id[i][-1], p.Done)
        assert_same_audio(audio_of(by_id[i]), expected[i]())
    first_c = next(k for k, m in enumerate(log) if m.context_id == "c" and isinstance(m, p.Audio))
    assert first_c < log.index(by_id["a"][-1])                              # generated side by side
    wait_idle(server)


def test_closing_the_socket_frees_every_engine_slot(server):
    async def run():
        ws = await connect(server)
        await recv(ws)
        await send(ws, *[p.Text(i, "Hello there, how are you doing", seed=k) for k, i in enumerate("xyz")])
        await send(ws, p.End("z"))                              # z generates every step; x and y wait for text
        started = set()
        while started != set("xyz"):
            started.add((await recv(ws)).context_id)
        assert server.engine.num_active == 3
        await ws.close()

    asyncio.run(run())
    wait_idle(server, 30)                                # the gateway's clock stands still: no timeout freed them


def test_bad_input_gets_documented_codes_and_the_socket_stays_usable(server):
    async def expect(ws, code, context_id=None):
        msg = await recv(ws)
        while isinstance(msg, p.Audio):                 # audio of a context that the error then ends
            msg = await recv(ws)
        assert isinstance(msg, p.Error) and (msg.code, msg.context_id) == (code, context_id), msg
        return msg

    async def run():
        async with connect(server) as other, connect(server) as ws:
            await recv(other), await recv(ws)
            await send(other, p.Text("o", "Meanwhile, elsewhere.", seed=9), p.End("o"))
            cases = [
                ("not json", p.INVALID_JSON, None),
                ('{"type": "speak", "context_id": "x"}', p.UNKNOWN_TYPE, "x"),
                ('{"type": "text", "text": "hi"}', p.INVALID_MESSAGE, None),
                (p.encode(p.Text("v", "Hi", voice="nobody")), p.UNKNOWN_VOICE, "v"),
                (p.encode(p.Text("l", "Hi", language="klingon")), p.UNKNOWN_LANGUAGE, "l"),
                (p.encode(p.Text("big", "x" * 70000)), p.MESSAGE_TOO_LARGE, None),
                (b"\x01\x02", p.INVALID_MESSAGE, None),
                (p.encode(p.Flush("nope")), p.UNKNOWN_CONTEXT, "nope"),
                (p.encode(p.Text("v", "Again")), p.DUPLICATE_CONTEXT, "v"),
            ]
            for raw, code, context_id in cases:
                await ws.send(raw)
                error = await expect(ws, code, context_id)
                assert error.retryable is False and error.message
            await send(ws, p.Text("ok", "Still works.", seed=4), p.End("ok"))
            assert isinstance((await collect(ws, ["ok"]))["ok"][-1], p.Done)
            await send(ws, p.Text("ok", "Reused."))
            await expect(ws, p.DUPLICATE_CONTEXT, "ok")
            await send(ws, p.Text("e", "Ended early.", seed=4), p.End("e"), p.Text("e", " More."))
            await expect(ws, p.CONTEXT_ENDED, "e")
            await send(ws, p.Text("long", "a " * 1500), p.Text("long", "b " * 1500))
            await expect(ws, p.TEXT_TOO_LONG, "long")
            await send(ws, *[p.Text(f"t{k}", "Hold the line", seed=k) for k in range(4)])
            await expect(ws, p.TOO_MANY_CONTEXTS, "t3")
            await send(ws, p.Cancel("*"))
            ends = await collect(ws, ["t0", "t1", "t2"])
            assert all(isinstance(m[-1], p.Cancelled) for m in ends.values())
            return (await collect(other, ["o"]))["o"]

    other = asyncio.run(run())
    assert_same_audio(audio_of(other), engine_audio(server, "Meanwhile, elsewhere.", 9, voice=None)())
    wait_idle(server)


def test_messages_keep_their_order_from_the_socket_s_first_byte(server):
    """Messages sent at once, before the session's `ready`, are answered in the order sent, a binary frame
    included."""
    async def run():
        async with connect(server) as ws:
            frames = [p.encode(p.Flush(f"u{k}")) for k in range(40)]
            frames.insert(20, b"\x01\x02")
            for frame in frames:                      # at once, before the ready
                await ws.send(frame)
            assert isinstance(await recv(ws), p.Ready)
            return [await recv(ws) for _ in frames]

    errors = asyncio.run(run())
    expected = [(p.UNKNOWN_CONTEXT, f"u{k}") for k in range(40)]
    expected.insert(20, (p.INVALID_MESSAGE, None))
    assert [(e.code, e.context_id) for e in errors] == expected
    wait_idle(server)


def test_split_fragmented_and_large_frames_arrive_whole_and_in_order(server):
    """A frame cut across reads, a fragmented message, a 5 KB one and a ping reach the session whole and in
    order."""
    def masked(text: str) -> bytes:
        data, mask = text.encode(), b"\x01\x02\x03\x04"
        return bytes((0x81, 0x80 | len(data))) + mask + bytes(b ^ mask[k % 4] for k, b in enumerate(data))

    async def run():
        async with connect(server) as ws:
            assert isinstance(await recv(ws), p.Ready)
            flush = p.encode(p.Flush("fragmented"))
            await ws.send([flush[:10], flush[10:]])
            await ws.send('{"type": "flush", "context_id": "large", "pad": "' + "x" * 5000 + '"}')
            frame = masked(p.encode(p.Flush("split")))
            for piece in (frame[:1], frame[1:7], frame[7:]):
                ws.transport.write(piece)
                await asyncio.sleep(0.05)
            await ws.send(p.encode(p.Flush("after")))
            await asyncio.wait_for(await ws.ping(), 10)
            return [await recv(ws) for _ in range(4)]

    errors = asyncio.run(run())
    assert [(e.code, e.context_id) for e in errors] == \
        [(p.UNKNOWN_CONTEXT, cid) for cid in ("fragmented", "large", "split", "after")]
    wait_idle(server)


def test_a_fault_outside_any_context_s_handling_closes_the_socket_with_internal(server, monkeypatch):
    """A message whose handling raises fails the session: an `internal` error, then close 1011."""
    from gateway.session import Session

    def broken(self, raw):
        raise RuntimeError("a fault of ours")

    async def run():
        async with connect(server) as ws:
            await recv(ws)
            monkeypatch.setattr(Session, "_parse", broken)
            await send(ws, p.Flush("x"))
            error = await recv(ws)
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await recv(ws)
            return error, closed.value.rcvd.code

    error, code = asyncio.run(run())
    assert (error.code, error.retryable, code) == (p.INTERNAL, True, 1011)
    monkeypatch.undo()
    wait_idle(server)


def test_invalid_utf8_in_a_text_frame_closes_with_1007(server):
    async def run():
        async with connect(server) as ws:
            await recv(ws)
            await ws.send(b"\xff\xfe", text=True)
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await recv(ws)
            return closed.value.rcvd.code

    assert asyncio.run(run()) == 1007
    wait_idle(server)


def test_beyond_max_active_new_contexts_are_busy_at_once(server):
    async def run():
        async with connect(server) as a, connect(server) as b:
            await recv(a), await recv(b)
            await send(a, *[p.Text(f"a{k}", "Keep generating", seed=k) for k in range(3)])
            await send(b, p.Text("b0", "Me too"))
            for ws, n in ((a, 3), (b, 1)):
                started = set()
                while len(started) < n:
                    started.add((await recv(ws)).context_id)
            await send(b, p.Text("b1", "One more"))
            busy = await recv(b)
            while isinstance(busy, p.Audio):
                busy = await recv(b)
            assert isinstance(busy, p.Error) and (busy.code, busy.context_id, busy.retryable) == (p.BUSY, "b1", True)
            await send(a, p.Cancel("*"))
            await collect(a, ["a0", "a1", "a2"])
            await send(b, p.Text("b2", "Now there is room.", seed=1), p.End("b2"))
            return (await collect(b, ["b2"]))["b2"]

    assert isinstance(asyncio.run(run())[-1], p.Done)
    wait_idle(server)


def test_auth_and_query_errors_close_the_connection(server):
    async def refused(**kw):
        async with connect(server, **kw) as ws:
            error = await recv(ws)
            await ws.wait_closed()
            return error.code, ws.close_code

    async def run():
        assert await refused(headers={}) == (p.UNAUTHORIZED, p.CLOSE_POLICY)
        assert await refused(headers={"Authorization": "Bearer wrong"}) == (p.UNAUTHORIZED, p.CLOSE_POLICY)
        assert await refused(sample_rate=44100) == (p.INVALID_PARAMETER, p.CLOSE_POLICY)
        async with connect(server, headers={}, api_key=KEY) as ws:
            assert isinstance(await recv(ws), p.Ready)

    asyncio.run(run())
    assert server.http.post("/v1/audio/speech", json={"input": "Hi"}).status_code == 401


def test_sockets_beyond_the_limit_close_with_1013(server):
    wait_idle(server)

    async def run():
        sockets = [await connect(server) for _ in range(4)]
        async with connect(server) as ws:
            error = await recv(ws)
            await ws.wait_closed()
        for s in sockets:
            await s.close()
        return error, ws.close_code

    error, close_code = asyncio.run(run())
    assert (error.code, error.retryable, close_code) == (p.BUSY, True, p.CLOSE_TRY_LATER)


def test_idle_context_times_out_unless_kept_alive(server):
    async def run():
        async with connect(server) as ws:
            await recv(ws)
            await send(ws, p.Text("idle", "Waiting for more", seed=1))
            for _ in range(3):                                # 4.5 s, longer than the 2 s timeout
                await send(ws, p.Keepalive(), p.Keepalive("probe"))
                while (await recv(ws)).context_id != "probe":  # the probe's error: the keepalive was read
                    pass
                await clock.checked(1.5)
            assert server.gateway.open_contexts == 1
            async with asyncio.timeout(30):                  # audio still coming keeps it alive
                while server.gateway.open_contexts:
                    await clock.checked(2.5)
            return (await collect(ws, ["idle"]))["idle"][-1]

    clock = server.gateway.clock
    last = asyncio.run(run())
    assert isinstance(last, p.Error) and last.code == p.CONTEXT_TIMEOUT
    wait_idle(server)
