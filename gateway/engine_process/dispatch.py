"""The engine core's dispatch of what front ends send: requests' commands to the engine in one batch per front-end
batch, voices and alignments answered; and what goes back (chunks, answers, voice names, stats)."""
import itertools
import logging
import os
import threading
from functools import partial

from engine.api.commands import AddRequest, AppendText, CancelRequest, CloseText

from . import wire
from .messages import (AdmitWords, Align, Answer, Chunk, DeleteVoice, Failed, Failure, Hello, Ready, RegisterVoice,
                       Shutdown, Unalign, VoiceList)

log = logging.getLogger("qwen_tts_gateway")
ID_SPAN = 1 << 40             # each front end's request ids: a range of its own, so the engine takes them as sent


class Dispatch:
    def __init__(self, engine, aligner, put, deliver, stop):
        """`put(peer, message)` sends from any thread; `deliver((peer, message))`, the engine thread's, goes out once
        its loop ends; `stop()` ends the core."""
        self.engine, self.aligner, self.put, self.deliver, self.stop = engine, aligner, put, deliver, stop
        self.peers: set[bytes] = set()
        self.first_ids = itertools.count(ID_SPAN, ID_SPAN)
        self.voice_names: list[str] = []       # as last shipped to the front ends
        self.voices_lock = threading.Lock()    # registrations are answered from the engine's background thread
        self.handlers = {AddRequest: self._add, AppendText: self._forward, CloseText: self._forward,
                         CancelRequest: self._forward, Hello: self._hello, RegisterVoice: self._register_voice,
                         DeleteVoice: self._delete_voice, Align: self._align, Unalign: self._unalign,
                         AdmitWords: self._admit_words, Shutdown: self._shutdown}
        self.aligning: dict = {}              # (peer, key) -> the aligner's Future of a job
        self.pids: dict[bytes, int] = {}       # each front end's process
        self.open: dict[bytes, set[int]] = {}  # each front end's requests that have not ended

    def receive(self, peer: bytes, frames: list) -> None:
        """A front end's batch: its requests' commands go to the engine in one batch, in order; the rest answered."""
        try:
            messages = wire.loads(frames)
        except Exception:
            return log.exception("a batch from a front end could not be read")
        commands = []
        for msg in messages:
            try:
                command = self.handlers[type(msg)](peer, msg)
            except Exception as exc:          # bad input: answered where it can be; the core goes on
                self._refuse(peer, msg, exc)
            else:
                if command is not None:
                    commands.append(command)
        if commands:
            self.engine.apply(commands)

    def _add(self, peer: bytes, msg: AddRequest):
        opened = self.open.setdefault(peer, set())
        opened.add(msg.id)
        return self.engine.sequence(msg.id, msg.request, Delivery(self.deliver, peer, msg.id, opened))

    @staticmethod
    def _forward(peer: bytes, msg):
        return msg

    def _hello(self, peer: bytes, msg: Hello) -> None:
        self.put(peer, Ready(self.description(), next(self.first_ids)))
        self.pids[peer] = msg.pid
        with self.voices_lock:
            self.peers.add(peer)
            self.put(peer, VoiceList(self.voice_names))

    def _register_voice(self, peer: bytes, msg: RegisterVoice) -> None:
        self.engine.register_voice(msg.name, msg.ref).add_done_callback(partial(self._answer, peer, msg.key, True))

    def _delete_voice(self, peer: bytes, msg: DeleteVoice) -> None:
        deleted = self.engine.delete_voice(msg.name)
        self.ship_voice_names()
        self.put(peer, Answer(msg.key, deleted))

    def _align(self, peer: bytes, msg: Align) -> None:
        if self.aligner is None:
            raise RuntimeError("this engine core has no aligner")
        self.aligning[(peer, msg.key)] = aligned = self.aligner.submit(msg.audio, msg.units, msg.due)
        aligned.add_done_callback(partial(self._aligned, peer, msg.key))

    def _aligned(self, peer: bytes, key: int, future) -> None:
        self.aligning.pop((peer, key), None)
        self._answer(peer, key, False, future)      # a dropped one too: the front end forgets the call

    def _unalign(self, peer: bytes, msg: Unalign) -> None:
        if job := self.aligning.pop((peer, msg.key), None):
            job.cancel()                  # skipped when its batch is formed

    def _admit_words(self, peer: bytes, msg: AdmitWords) -> None:
        if self.aligner is None:
            raise RuntimeError("this engine core has no aligner")
        self.aligner.admit().add_done_callback(partial(self._answer, peer, msg.key, False))

    def _shutdown(self, peer: bytes, msg: Shutdown) -> None:
        self.stop()

    def reap(self) -> None:
        """A front end whose process is gone (killed, crashed) leaves requests no one will close: they are cancelled,
        so their slots and KV come back."""
        for peer, pid in list(self.pids.items()):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                log.warning("front end %d is gone: its %d open requests are cancelled", pid,
                            len(self.open.get(peer, ())))
                del self.pids[peer]
                with self.voices_lock:
                    self.peers.discard(peer)
                self.engine.apply([CancelRequest(i) for i in self.open.pop(peer, ())])
                for key in [k for k in self.aligning if k[0] == peer]:
                    self.aligning.pop(key).cancel()
            except PermissionError:
                pass

    def _refuse(self, peer: bytes, msg, exc: Exception) -> None:
        log.warning("a %s from a front end was refused: %s", type(msg).__name__, exc)
        if isinstance(msg, AddRequest):
            self.put(peer, Failed(msg.id, Failure.of(exc)))
        elif isinstance(getattr(msg, "key", None), int):
            self.put(peer, Answer(msg.key, Failure.of(exc)))

    def _answer(self, peer: bytes, key: int, voice_changed: bool, future) -> None:
        exc = RuntimeError("cancelled") if future.cancelled() else future.exception()
        if voice_changed:
            self.ship_voice_names()          # before the answer: the front end lists the new voice at once
        self.put(peer, Answer(key, Failure.of(exc) if exc else future.result()))

    def ship_voice_names(self) -> None:
        """Only when they changed (at most --max-voices names); one stat of the voices folder otherwise."""
        with self.voices_lock:
            names = self.engine.voice_names()
            if names != self.voice_names:
                self.voice_names = names
                for peer in self.peers:
                    self.put(peer, VoiceList(names))

    def description(self) -> dict:
        return dict(self.engine.description(), aligner=bool(self.aligner))

    def stats(self) -> dict:
        stats = self.engine.stats()
        if self.aligner is not None:
            stats.update({f"aligner_{key}": value for key, value in self.aligner.stats.items()},
                         aligner_queued=self.aligner.queued,
                         aligner_refused_behind=self.aligner.admission.refused_behind,
                         aligner_used=self.aligner.admission.recent_use(),
                         aligner_cost_ms=1000 * self.aligner.cost_per_audio_s() if self.aligner.side_work else 0.0,
                         aligner_capacity=self.aligner.side_work.plan.capacity
                         if self.aligner.side_work and self.aligner.side_work.plan else 0.0)
        return stats


class Delivery:
    """A request's chunks and error, from the engine thread to its front end."""
    __slots__ = ("send", "peer", "id", "opened")

    def __init__(self, send, peer: bytes, request_id: int, opened: set):
        self.send, self.peer, self.id, self.opened = send, peer, request_id, opened

    def deliver(self, item) -> None:
        if isinstance(item, Exception) or item.final:
            self.opened.discard(self.id)
        msg = Failed(self.id, Failure.of(item)) if isinstance(item, Exception) else Chunk(self.id, item)
        self.send((self.peer, msg))
