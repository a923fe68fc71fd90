"""The engine-core boundary's messages, each dispatched by its type: a front end's turn batch (appends merged, order
kept), the core's dispatch of every front-end message, the client's of every core message, the engine thread's of
every command; bad or unknown input is answered or logged, never fatal."""
import asyncio
import os
import pickle
import subprocess
from concurrent.futures import Future

import numpy as np
import pytest
import zmq
import zmq.asyncio

from engine import AudioChunk, Engine, EngineInputError, SynthesisRequest
from engine.api.commands import AddRequest, AppendText, Batch, CancelRequest, CloseText
from engine.api.handle import RequestHandle
from engine.api.request import UnjoinedChunk
from engine.models.qwen3_tts.requests import ROLE
from gateway.engine_process import client as client_module, wire
from gateway.engine_process.client import EngineClient
from gateway.engine_process.dispatch import ID_SPAN, Dispatch
from gateway.engine_process.messages import (Align, Answer, Chunk, Chunks, DeleteVoice, Failed, Failure, Hello, Ready,
                                             RegisterVoice, Shutdown, Stats, VoiceList)
from gateway.engine_process.turn_batch import BATCH_S, TurnBatch


def test_a_turn_merges_appends_to_one_request_and_keeps_every_other_order():
    batch = TurnBatch()
    sent = [AddRequest(1, None), AppendText(1, "a"), AppendText(2, "x"), AppendText(1, "b"), CloseText(1),
            AppendText(1, "late"), AppendText(2, "y"), CancelRequest(2), AppendText(2, "z"), Hello(os.getpid())]
    firsts = [batch.add(m) for m in sent]
    assert firsts == [True] + [False] * 9
    assert batch.due(10.0) == 10.0                                   # the first batch: at once
    assert batch.take(10.0) == [AddRequest(1, None), AppendText(1, "ab"), AppendText(2, "xy"), CloseText(1),
                                AppendText(1, "late"), CancelRequest(2), AppendText(2, "z"), Hello(os.getpid())]
    assert batch.add(AppendText(1, "c")) and batch.take(10.001) == [AppendText(1, "c")]     # a new batch
    assert batch.due(10.0015) == 10.001 + BATCH_S and batch.due(10.5) == 10.5    # BATCH_S after the last, or now


class StandInEngine:
    def __init__(self):
        self.applied, self.names = [], ["old"]

    def sequence(self, seq_id, request, handle):
        if request == "bad":
            raise EngineInputError("invalid_request", "bad request")
        return ("seq", seq_id, request, handle)

    def apply(self, commands):
        self.applied.append(commands)

    def register_voice(self, name, ref):
        future = Future()
        self.names.append(name)
        future.set_result(name)
        return future

    def delete_voice(self, name):
        return name in self.names and not self.names.remove(name)

    def voice_names(self):
        return list(self.names)

    def description(self):
        return {"info": {}}

    def stats(self):
        return {"active": 0}

    def on_delivered(self, callback):
        self.delivered = callback

    def shutdown(self):
        pass


def dispatch_with(aligner=None):
    engine, sent, stopped = StandInEngine(), [], []
    return engine, sent, stopped, Dispatch(engine, aligner, lambda peer, m: sent.append((peer, m)), sent.append,
                                           lambda: stopped.append(True))


def test_the_core_dispatches_every_front_end_message_by_its_type():
    aligner = type("Aligner", (), {"submit": lambda self, audio, units, due: done(("times", units, due))})()
    engine, sent, stopped, core = dispatch_with(aligner)
    batch = [Hello(os.getpid()), AddRequest(ID_SPAN, "req"), AppendText(ID_SPAN, "hi"), CloseText(ID_SPAN),
             CancelRequest(ID_SPAN + 1), RegisterVoice(1, "new", "ref"), DeleteVoice(2, "old"),
             Align(3, np.zeros(4, np.float32), ["a"], 1.5), Shutdown()]
    core.receive(b"p", wire.dumps(batch))
    seq, *ops = engine.applied[0]
    assert len(engine.applied) == 1 and seq[:3] == ("seq", ID_SPAN, "req") and ops == batch[2:5]
    seq[3].deliver(AudioChunk(np.zeros(1, np.float32), np.zeros((1, 2), np.int64), 0, 0, True))
    seq[3].deliver(EngineInputError("busy", "full"))
    messages = [m for peer, m in sent if peer == b"p"]
    assert messages[0] == Ready({"info": {}, "aligner": True}, ID_SPAN) and messages[1] == VoiceList([])
    assert messages[2] == VoiceList(["old", "new"]) and messages[3] == Answer(1, "new")   # listed before answered
    assert messages[4] == VoiceList(["new"]) and messages[5] == Answer(2, True)
    assert messages[6] == Answer(3, ("times", ["a"], 1.5)) and stopped == [True]
    assert isinstance(messages[7], Chunk) and messages[7].id == ID_SPAN and messages[7].chunk.final
    assert messages[8] == Failed(ID_SPAN, Failure("full", "busy"))
    core.receive(b"q", wire.dumps([Hello(os.getpid())]))
    assert sent[-2][1].first_id == 2 * ID_SPAN                  # another front end, another range of ids


def test_a_front_end_that_died_has_its_open_requests_cancelled_and_nothing_else():
    engine, sent, stopped, core = dispatch_with()
    gone, alive = subprocess.Popen(["sleep", "60"]), os.getpid()
    core.receive(b"gone", wire.dumps([Hello(gone.pid), AddRequest(ID_SPAN, "a"), AddRequest(ID_SPAN + 1, "b"),
                                        AddRequest(ID_SPAN + 2, "c")]))
    core.receive(b"alive", wire.dumps([Hello(alive), AddRequest(2 * ID_SPAN, "d")]))
    ended = engine.applied[0][1][3]
    ended.deliver(AudioChunk(np.zeros(1, np.float32), np.zeros((1, 2), np.int64), 0, 0, True))
    core.reap()
    assert len(engine.applied) == 2                               # both alive: nothing cancelled
    gone.kill(), gone.wait()
    core.reap()
    assert engine.applied[2] == [CancelRequest(ID_SPAN), CancelRequest(ID_SPAN + 2)] or \
        engine.applied[2] == [CancelRequest(ID_SPAN + 2), CancelRequest(ID_SPAN)]
    core.reap()
    assert len(engine.applied) == 3 and b"gone" not in core.peers and core.open[b"alive"] == {2 * ID_SPAN}


def done(result):
    future = Future()
    future.set_result(result)
    return future


def test_the_engine_threads_deliveries_leave_when_its_loop_ends_in_one_message_a_front_end(monkeypatch):
    """A step's chunks wait for the engine thread's loop to end, then go out together: one Chunks a front end, not
    pieces sent while the engine thread still makes the rest (each a wake-up of the I/O thread and a GIL hand-off)."""
    from gateway.engine_process import starts
    from gateway.engine_process.io_loop import CoreIOLoop
    engine = StandInEngine()
    core = CoreIOLoop(engine, None, starts.address())
    sent = []
    monkeypatch.setattr(core.sock, "send_multipart", lambda frames, copy: sent.append((frames[0], wire.loads(
        [bytes(f) for f in frames[1:]]))))
    core.dispatch.receive(b"p", wire.dumps([Hello(os.getpid()), AddRequest(ID_SPAN, "a"),
                                            AddRequest(ID_SPAN + 1, "b")]))
    core.dispatch.receive(b"q", wire.dumps([Hello(os.getpid()), AddRequest(2 * ID_SPAN, "c")]))
    core._flush()
    sent.clear()
    for _, seq_id, _, handle in (cmd for batch in engine.applied for cmd in batch):
        handle.deliver(UnjoinedChunk([(np.full(2, seq_id), np.ones(3, np.float32))], 0, 0))
    assert core.outbox.empty()                                  # nothing leaves before the loop's end
    engine.delivered()
    core._flush()
    assert [peer for peer, _ in sent] == [b"p", b"q"] and all(len(msgs) == 1 for _, msgs in sent)
    assert [[c.id for c in msgs[0].unpack()] for _, msgs in sent] == [[ID_SPAN, ID_SPAN + 1], [2 * ID_SPAN]]
    engine.delivered()
    assert core.outbox.empty()                                  # an empty loop sends nothing
    core.close()


# the last: an array sent out of band, its frame missing
@pytest.mark.parametrize("frames", [[b"not a pickle"], [pickle.dumps({"a": 1})], [pickle.dumps([("append", 1, "x")])],
                                    [pickle.dumps([ValueError("x"), None, 3])], [], [b""],
                                    [pickle.dumps([np.zeros(1 << 17)], protocol=5, buffer_callback=lambda b: False)]])
def test_malformed_or_unknown_input_leaves_the_core_running(frames):
    engine, sent, stopped, core = dispatch_with()
    core.receive(b"p", frames)
    core.receive(b"p", wire.dumps([AddRequest(5, "bad"), Align(6, None, [], None), AddRequest(7, "req")]))
    assert sent == [(b"p", Failed(5, Failure("bad request", "invalid_request"))),
                    (b"p", Answer(6, Failure("this engine core has no aligner")))]
    assert [c[0][:2] for c in engine.applied] == [("seq", 7)] and not stopped


def test_the_client_dispatches_every_core_message_by_its_type(engine):
    async def run():
        client = EngineClient(lambda: None, "ipc:///nonexistent/engine")
        client.ready = asyncio.get_running_loop().create_future()
        rules = engine.description()
        client._dispatch([Ready(dict(rules, aligner=False), 7 * ID_SPAN), VoiceList(["ann"]), Stats({"active": 3}),
                          "unknown"])
        handle = client.submit(SynthesisRequest(text="Hi"))
        failing = client.submit(SynthesisRequest(text="Hi"))
        voice, deleted = client.register_voice("bob", None), client.delete_voice("ann")
        chunk = AudioChunk(np.zeros(1, np.float32), np.zeros((1, 2), np.int64), 0, 0, True)
        client._dispatch([Chunks.of([Chunk(handle.id, chunk)]), Failed(failing.id, Failure("full", "busy")),
                          Answer(voice_key(client, voice), "bob"), Answer(voice_key(client, deleted), Failure("x"))])
        assert (handle.id, failing.id) == (7 * ID_SPAN, 7 * ID_SPAN + 1)
        [got] = [c async for c in handle]
        assert same_chunk(got, chunk) and client.requests == {}
        with pytest.raises(EngineInputError, match="full"):
            await failing.__anext__()
        assert await voice == "bob" and client.voice_names() == ["ann"] and client.stats() == {"active": 3}
        with pytest.raises(RuntimeError, match="x"):
            await deleted
        assert [type(m) for m in client.batch.take(0.0)] == [AddRequest, AddRequest, RegisterVoice, DeleteVoice]
    asyncio.run(run())


def test_a_reader_that_outlives_its_closed_socket_ends_instead_of_retrying(monkeypatch):
    """close() cancels the reader, then closes its socket; a message arriving with the cancel makes Python 3.11's
    wait_for lose it, and the next read meets the closed socket: once, not in a loop that never yields."""
    def logged(*args):
        raise AssertionError(f"the reader retried a closed socket: {args}")
    monkeypatch.setattr(client_module.log, "exception", logged)

    async def run():
        client = EngineClient(lambda: None, "ipc:///nonexistent/engine")
        client.ready = asyncio.get_running_loop().create_future()
        client.ctx = zmq.asyncio.Context()
        client.sock = wire.socket(client.ctx, zmq.DEALER, client.identity)
        client.sock.close()
        await client._read()
        client.ctx.term()
    asyncio.run(run())


def voice_key(client, future) -> int:
    return next(key for key, f in client.calls.items() if f is future)


def test_the_engine_thread_applies_a_batch_in_order_and_survives_an_unknown_command():
    engine = Engine.load(dummy="tiny", device="cpu", max_active=2)       # not started: the test drains its inbox
    request = lambda: SynthesisRequest(text="", text_complete=False)
    a, b = (engine.sequence(i, engine.validator.prepare(request()), RequestHandle(i)) for i in (1, 2))
    engine.apply([a, b, AppendText(1, "One, "), AppendText(2, "Un, "), "unknown", AppendText(1, "two."),
                  CloseText(1), AppendText(1, " not spoken"), AppendText(2, "deux.")])
    engine.thread.drain()
    assert engine.thread.errors == 1                                   # the unknown command, logged
    decode = lambda seq: engine.model.tokenizer.decode(seq.text.role_ids + seq.text.feed)
    assert decode(a) == ROLE + "One, two." and a.text.closed
    assert decode(b) + "".join(b.text.unsettled) == ROLE + "Un, deux." and not b.text.closed   # its last word may change
    engine.inbox.put(Batch([CancelRequest(2), AppendText(2, " after cancel"), AddRequest(3, None)]))
    engine.thread.drain()
    assert engine.thread.errors == 2 and b.finish_reason == "cancelled" and list(engine.thread.seqs) == [1]


def test_a_batch_carries_its_chunks_joined_out_of_band_and_back_each_its_own_in_order():
    pcm, codes = np.arange(1 << 15, dtype=np.float32), np.arange(32, dtype=np.int64).reshape(2, 16)
    sent = [Stats({}), Chunk(ID_SPAN, AudioChunk(pcm, codes, 3, 5760, False, None, 1.5)), Failed(9, Failure("x")),
            Chunk(ID_SPAN + 1, UnjoinedChunk([(codes[0], pcm[:7]), (codes[1], pcm[7:10])], 0, 0, False)),
            Chunk(ID_SPAN, AudioChunk(np.zeros(0, np.float32), codes[:0], 5, 9600, True, "eos", 2.5))]
    frames = wire.dumps(Chunks.gather(sent))
    assert len(frames) == 2 and frames[1].raw().nbytes == pcm.nbytes + 40    # every PCM one frame, the codes inside
    stats, chunks, failed = wire.loads([bytes(f) for f in frames])          # as the socket hands frames over
    assert (stats, failed) == (Stats({}), Failed(9, Failure("x")))
    got = chunks.unpack()
    assert [c.id for c in got] == [ID_SPAN, ID_SPAN + 1, ID_SPAN]
    joined = [m.chunk.joined() if type(m.chunk) is UnjoinedChunk else m.chunk for m in sent if type(m) is Chunk]
    assert all(same_chunk(g.chunk, j) for g, j in zip(got, joined)) and len(got[1].chunk.pcm) == 10
    assert not any(np.shares_memory(c.chunk.pcm, chunks.pcm) for c in got)     # a chunk holds no other's audio
    assert Chunks.gather(sent[:1]) == sent[:1]


def same_chunk(a: AudioChunk, b: AudioChunk) -> bool:
    return np.array_equal(a.pcm, b.pcm) and np.array_equal(a.codes, b.codes) and a.codes.shape == b.codes.shape \
        and (a.frame_offset, a.sample_offset, a.final, a.finish_reason, a.sent_at) == \
        (b.frame_offset, b.sample_offset, b.final, b.finish_reason, b.sent_at)
