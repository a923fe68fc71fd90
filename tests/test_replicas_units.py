"""The proxy's parts without Ray: the replica's frames followed in any split of the bytes, the metrics of several
replicas as one labelled page, the least loaded replica with room, and the units' arguments."""
from websockets.frames import Frame, Opcode

from gateway.replicas import frames
from gateway.replicas.balance import ReplicaTable
from gateway.replicas.launch import unit_args
from gateway.replicas.metrics import gauges, merge


def test_frame_boundaries_in_any_split_of_the_stream():
    head = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"
    long = bytes([0x82, 127]) + (70000).to_bytes(8, "big") + b"z" * 70000       # a 64-bit length
    stream = head + b"".join(Frame(op, data).serialize(mask=False) for op, data in ((Opcode.TEXT, b"x" * 5),
                                                                              (Opcode.BINARY, b"y" * 300))) + long
    for size in (1, 2, 3, 7, 64, 1000, len(stream)):
        tracker, ends = frames.ServerFrames(), []
        for i in range(0, len(stream), size):
            tracker.feed(stream[i:i + size])
            ends.append(tracker.at_boundary)
        assert tracker.at_boundary and not tracker.closed
        assert not all(ends[:-1]) or size == len(stream)
    tracker = frames.ServerFrames()
    tracker.feed(head + frames.error_and_close("internal", "gone", 1011))
    assert tracker.closed and tracker.at_boundary
    refused = frames.ServerFrames()
    refused.feed(b"HTTP/1.1 403 Forbidden\r\n\r\n")
    assert refused.closed and not refused.at_boundary


def test_accept_answers_the_rfc_example():
    assert b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in frames.accept("dGhlIHNhbXBsZSBub25jZQ==")


def test_metrics_of_every_replica_labelled():
    page = ("# HELP tts_sockets open\n# TYPE tts_sockets gauge\ntts_sockets 3\n"
            "# HELP tts_requests_total started\n# TYPE tts_requests_total counter\n"
            'tts_requests_total{api="websocket"} 5\n')
    merged = merge({"1": page.replace(" 3\n", " 4\n"), "0": page})
    assert merged.count("# TYPE tts_sockets gauge") == 1
    assert 'tts_sockets{replica="0"} 3\ntts_sockets{replica="1"} 4\n' in merged
    assert 'tts_requests_total{replica="1",api="websocket"} 5' in merged
    assert gauges(page) == {"tts_sockets": 3.0}


def test_the_least_loaded_replica_with_room():
    table = ReplicaTable(wanted=3, max_step_ms=64.0)
    table.members([dict(name=str(i), url=f"http://10.0.0.1:{8000 + i}", pid=i) for i in range(3)])
    a, b, c = table.replicas.values()
    for replica, streams, step in ((a, 10, 20.0), (b, 4, 30.0), (c, 0, 70.0)):
        replica.info = {}
        table.polled(replica, dict(tts_generating_requests=streams, tts_max_active=16, tts_engine_step_ms=step))
    assert table.started and table.choose() is b                   # c's step is over --max-step-ms
    b.connections = 20
    assert table.choose() is a
    a.streams = b.streams = 16
    assert table.choose() is None                                  # every one is full: `busy` at the proxy
    table.polled(c, None)
    assert table.ready() == [a, b]


def test_units_get_serve_arguments_but_the_replicas_own():
    argv = ["--replicas", "2", "--dummy", "tiny", "--port=9000", "--host", "0.0.0.0", "--proxies", "2", "--workers", "1"]
    assert unit_args(argv) == ["--dummy", "tiny", "--workers", "1"]
