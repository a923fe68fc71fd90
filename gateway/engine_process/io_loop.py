"""The engine core's I/O thread: front ends' commands go to the engine, whose step never waits on this thread."""
import logging
import os
import queue
import signal
import time
from collections import defaultdict
from typing import NamedTuple

import zmq

from .. import fatal
from . import wire
from .dispatch import Dispatch
from .messages import Chunks, Stats

log = logging.getLogger("qwen_tts_gateway")
STATS_S = 0.1


class Packed(NamedTuple):
    """A front end's batch from the engine thread, pickled: its frames as the socket sends them."""
    peer: bytes
    frames: list


def packed(pairs: list) -> list[Packed]:
    """(peer, message) pairs as one pickled batch a front end, its chunks joined (a joined PCM is the batch's alone:
    zmq sends it without a copy)."""
    batches = defaultdict(list)
    for peer, msg in pairs:
        batches[peer].append(msg)
    return [Packed(peer, wire.dumps(Chunks.gather(msgs))) for peer, msgs in batches.items()]


class CoreIOLoop:
    def __init__(self, engine, aligner, address: str):
        self.engine, self.aligner = engine, aligner
        self.ctx = zmq.Context()
        self.sock = wire.socket(self.ctx, zmq.ROUTER)
        self.sock.bind(address)
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()       # (peer, message), or a Packed batch
        self.pending: list = []          # the engine thread's deliveries since its loop last ended
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self.signalled = False
        self.running = True
        self.failure: str | None = None
        self.dispatch = Dispatch(engine, aligner, self.put, self.pending.append, self.stop)
        engine.on_delivered(self.delivered)

    def serve(self, parent_pid: int | None = None) -> None:
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        poller.register(self.wake_r, zmq.POLLIN)
        next_stats = 0.0
        while self.running:
            events = dict(poller.poll(STATS_S * 1000))
            if self.wake_r in events:
                os.read(self.wake_r, 4096)
            while self.sock in events:
                try:
                    peer, *frames = self.sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self.dispatch.receive(peer, frames)
            if time.monotonic() >= next_stats:
                next_stats = time.monotonic() + STATS_S
                self.dispatch.reap()
                if not self.engine.is_alive():             # no request would ever end: the core fails, loudly
                    self.failure = "the engine thread stopped; restart the server (its log has the traceback)"
                    log.error(self.failure)
                    break
                self.dispatch.ship_voice_names()
                for peer in self.dispatch.peers:
                    self.put(peer, Stats(self.dispatch.stats()))
            self._flush()
            if parent_pid is not None and os.getppid() != parent_pid:
                log.error("the gateway process is gone: the engine core exits")
                break
        self.close()

    def stop(self) -> None:
        self.running = False

    def put(self, peer: bytes, msg) -> None:
        """From any thread (the engine's, the aligner's, this one)."""
        self.outbox.put((peer, msg))
        self._wake()

    def delivered(self) -> None:
        """The engine thread's, after each of its loops: a step's chunks, joined and pickled here, one batch a front
        end, so that this thread only sends them: it need not wait for the GIL the engine thread holds while it
        drains text, schedules and launches the next step."""
        if self.pending:
            for item in packed(self.pending):
                self.outbox.put(item)
            self.pending.clear()
            self._wake()

    def _wake(self) -> None:
        if not self.signalled:
            self.signalled = True
            try:
                os.write(self.wake_w, b"!")
            except BlockingIOError:
                pass

    def _flush(self) -> None:
        self.signalled = False
        pairs = []
        try:
            while True:
                item = self.outbox.get_nowait()
                if type(item) is Packed:
                    self._send(item)
                else:
                    pairs.append(item)
        except queue.Empty:
            pass
        for item in packed(pairs):
            self._send(item)

    def _send(self, item: Packed) -> None:
        self.sock.send_multipart([item.peer, *item.frames], copy=False)

    def close(self) -> None:
        if self.aligner is not None:
            self.aligner.close()
        self.engine.shutdown()
        self.sock.close()
        self.ctx.term()
        os.close(self.wake_r)
        os.close(self.wake_w)


def run_engine_process(spec, address: str, log_level: str = "info") -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # the gateway drains first, then stops the core itself
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s engine-core: %(message)s")
    parent = os.getppid()
    try:
        engine, aligner = spec.build()
    except Exception as exc:                          # the front end reports it, in one line
        log.debug("the engine core could not start", exc_info=True)
        wire.failure_path(address).write_text(fatal.one_line(exc))
        raise SystemExit(1)
    core = CoreIOLoop(engine, aligner, address)
    core.serve(parent)
    if core.failure:                                  # the front end reports it, in one line, and /health turns 503
        wire.failure_path(address).write_text(core.failure)
        raise SystemExit(1)
