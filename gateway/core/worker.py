"""The engine core's I/O thread: front ends' commands go to the engine, whose step never waits on this thread."""
import logging
import os
import queue
import signal
import threading
import time
from collections import defaultdict
from functools import partial

import zmq

from .. import fatal
from . import wire

log = logging.getLogger("qwen_tts_gateway")
STATS_S = 0.1


class EngineWorker:
    def __init__(self, engine, aligner, address: str):
        self.engine, self.aligner = engine, aligner
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.SNDHWM, 0)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(address)
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self.signalled = False
        self.requests: dict = {}              # (peer, rid) -> the engine's RequestHandle
        self.aligning: dict = {}              # (peer, key) -> the aligner's Future of a job
        self.peers: set[bytes] = set()
        self.reports: dict[str, dict] = {}    # each front end's metrics, for every front end's /metrics
        self.voice_names: list[str] = []       # as last shipped to the front ends
        self.voices_lock = threading.Lock()    # registrations are answered from the engine's background thread
        self.running = True

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
                    peer, data = self.sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                for cmd in wire.loads(data):
                    self._apply(peer, cmd)
            if time.monotonic() >= next_stats:
                next_stats = time.monotonic() + STATS_S
                self._ship_voice_names()
                for peer in self.peers:
                    self.put(peer, ("stats", self.stats()))
            self._flush()
            if parent_pid is not None and os.getppid() != parent_pid:
                log.error("the gateway process is gone: the engine core exits")
                break
        self.close()

    def put(self, peer: bytes, msg: tuple) -> None:
        """From any thread (the engine's, the aligner's, this one)."""
        self.outbox.put((peer, msg))
        if not self.signalled:
            self.signalled = True
            try:
                os.write(self.wake_w, b"!")
            except BlockingIOError:
                pass

    def _flush(self) -> None:
        self.signalled = False
        batches = defaultdict(list)
        try:
            while True:
                peer, msg = self.outbox.get_nowait()
                batches[peer].append(msg)
        except queue.Empty:
            pass
        for peer, msgs in batches.items():
            self.sock.send_multipart([peer, wire.dumps(msgs)])

    def _apply(self, peer: bytes, cmd: tuple) -> None:
        kind, *args = cmd
        handle = self.requests.get((peer, args[0])) if kind in ("append", "close") else None
        try:
            if kind == "hello":
                self.put(peer, ("ready", self.description()))
                with self.voices_lock:
                    self.peers.add(peer)
                    self.put(peer, ("voices", self.voice_names))
            elif kind == "report":
                self.reports[peer.hex()] = args[0]
            elif kind == "add":
                rid, request = args
                self.requests[(peer, rid)] = self.engine.submit(request, sink=partial(self._deliver, peer, rid))
            elif kind == "append" and handle:
                handle.append_text(args[1])
            elif kind == "close" and handle:
                handle.close_text()
            elif kind == "cancel" and (handle := self.requests.pop((peer, args[0]), None)):
                handle.cancel()
            elif kind == "voice":
                self.engine.register_voice(*args[1:]).add_done_callback(partial(self._answer, peer, "voice", args[0]))
            elif kind == "delete_voice":
                deleted = self.engine.delete_voice(args[1])
                self._ship_voice_names()
                self.put(peer, ("voice", args[0], deleted))
            elif kind == "align":
                self.aligning[(peer, args[0])] = job = self.aligner.submit(*args[1:])
                job.add_done_callback(partial(self._aligned, peer, args[0]))
            elif kind == "unalign" and (job := self.aligning.pop((peer, args[0]), None)):
                job.cancel()                  # skipped when its batch is formed; no answer is awaited
            elif kind == "admit_words":
                self.aligner.admit().add_done_callback(partial(self._answer, peer, "aligned", args[0]))
            elif kind == "shutdown":
                self.running = False
        except Exception as exc:              # bad input: answered; the core goes on
            if kind in ("add", "append"):
                self.requests.pop((peer, args[0]), None)
                if handle:
                    handle.cancel()
            answer = {"voice": "voice", "delete_voice": "voice", "align": "aligned", "admit_words": "aligned"}.get(kind,
                                                                                                           "error")
            self.put(peer, (answer, args[0], wire.Failure.of(exc)))

    def _deliver(self, peer: bytes, rid: int, handle, item) -> None:
        if isinstance(item, Exception) or item.final:
            self.requests.pop((peer, rid), None)
        self.put(peer, ("error", rid, wire.Failure.of(item)) if isinstance(item, Exception) else ("chunk", rid, item))

    def _aligned(self, peer: bytes, key: int, future) -> None:
        self.aligning.pop((peer, key), None)
        self._answer(peer, "aligned", key, future)      # a dropped one too: the front end forgets the call

    def _answer(self, peer: bytes, kind: str, key: int, future) -> None:
        exc = RuntimeError("cancelled") if future.cancelled() else future.exception()
        if kind == "voice":
            self._ship_voice_names()          # before the answer: the front end lists the new voice at once
        self.put(peer, (kind, key, wire.Failure.of(exc) if exc else future.result()))

    def _ship_voice_names(self) -> None:
        """Only when they changed (at most --max-voices names); one stat of the voices folder otherwise."""
        with self.voices_lock:
            names = self.engine.voice_names()
            if names != self.voice_names:
                self.voice_names = names
                for peer in self.peers:
                    self.put(peer, ("voices", names))

    def description(self) -> dict:
        return dict(self.engine.description(), aligner=bool(self.aligner))

    def stats(self) -> dict:
        stats = dict(self.engine.stats(), frontends=self.reports)
        if self.aligner is not None:
            stats.update(aligner_queued=self.aligner.queued, aligner_busy_s=self.aligner.stats["busy_seconds"],
                         aligner_audio_s=self.aligner.stats["audio_seconds"],
                         aligner_refused=self.aligner.stats["refused"])
        return stats

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
    EngineWorker(engine, aligner, address).serve(parent)
