"""The front end's engine: the engine core behind a ZMQ socket (engine.api.interface's EngineInterface, as the
in-process Engine); requests are checked here, once; it never blocks the event loop."""
import asyncio
import itertools
import logging
import multiprocessing
import os
import time
import uuid
from concurrent.futures import Future

import zmq
import zmq.asyncio

from engine.api.commands import AddRequest, AppendText, CancelRequest, CloseText
from engine.api.handle import RequestHandle
from engine.api.validate import Validator

from .. import fatal
from . import wire
from .messages import (Answer, Chunks, DeleteVoice, Failed, Failure, Hello, Ready, RegisterVoice, Shutdown, Stats,
                       VoiceList)
from .remote import RemoteAligner, VoiceNames
from .turn_batch import TurnBatch

log = logging.getLogger("qwen_tts_gateway")
SILENCE_S = 10.0           # the core sends stats every 0.1 s: this long without a word, it is gone


class EngineClient:
    def __init__(self, start_core, address: str):
        """`start_core` starts the core; returns its Process, its Thread, or None (another front end's core)."""
        self.start_core, self.address = start_core, address
        self.requests: dict[int, RequestHandle] = {}
        self.calls: dict[int, asyncio.Future | Future] = {}
        self.keys = itertools.count(1)            # of calls (voices, alignments); request ids come with Ready
        self.batch = TurnBatch()
        self.voices, self.latest_stats = VoiceNames(), {}
        self.info = self.validator = self.ids = self.core = self.on_failure = self.failure = self.aligner = None
        self.identity = uuid.uuid4().bytes
        self.arrived = None               # (now, when the core took them, the chunks' send times): the gateway's metrics
        self.handlers = {Chunks: self._on_chunks, Failed: self._on_failed, Answer: self._on_answer,
                         Stats: self._on_stats, VoiceList: self.voices.take, Ready: self._on_ready}

    @property
    def process(self):
        return self.core if isinstance(self.core, multiprocessing.process.BaseProcess) else None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.ready = loop.create_future()
        self.ctx = zmq.asyncio.Context()
        self.sock = wire.socket(self.ctx, zmq.DEALER, self.identity)
        self.sender = zmq.Socket.shadow(self.sock.underlying)      # a plain send: no future per batch
        self.sock.connect(self.address)
        self.core = await asyncio.to_thread(self.start_core)
        if self.process is not None:
            loop.add_reader(self.process.sentinel, self._exited)
        self.reader = asyncio.create_task(self._read())
        self.send(Hello(os.getpid()))
        await self.ready

    def submit(self, request) -> RequestHandle:
        request = self.validator.prepare(request)
        if self.failure:
            raise RuntimeError(self.failure)
        handle = RequestHandle(next(self.ids))
        self.requests[handle.id] = handle
        self.send(AddRequest(handle.id, request))
        return handle

    def append_text(self, request_id: int, text: str) -> None:
        self.validator.check_append(text)
        self.send(AppendText(request_id, text))

    def close_text(self, request_id: int) -> None:
        self.send(CloseText(request_id))

    def cancel(self, request_id: int) -> None:
        """The request's last chunk (`cancelled`) or error still comes, and ends its handle."""
        if request_id in self.requests:
            self.send(CancelRequest(request_id))

    def stats(self) -> dict:                    # as the core last sent them (every 0.1 s)
        return self.latest_stats

    def register_voice(self, name: str, ref) -> asyncio.Future:
        return self.call(RegisterVoice(next(self.keys), name, ref))

    def delete_voice(self, name: str) -> asyncio.Future:
        return self.call(DeleteVoice(next(self.keys), name))

    def voice_names(self) -> list[str]:
        return self.voices.names()

    def send(self, msg) -> None:
        if self.batch.add(msg):
            loop = asyncio.get_running_loop()
            loop.call_at(self.batch.due(loop.time()), self._flush)

    def _flush(self) -> None:
        messages = self.batch.take(asyncio.get_running_loop().time())
        if not self.failure:            # never blocks: no high-water mark, and a pipe from connect() on
            self.sender.send_multipart(wire.dumps(messages), copy=False)
            self.sock.get(zmq.EVENTS)   # a read the send's processing signalled reaches the waiting recv (edge FD)

    def call(self, msg, future=None, dropped=None):
        """A message with a `key`: the future of its Answer; `dropped(key)`: the message that tells the core a
        cancelled call's work is no longer wanted."""
        future = future or asyncio.get_running_loop().create_future()
        if self.failure:
            future.set_exception(RuntimeError(self.failure))
            return future
        self.calls[msg.key] = future
        self.send(msg)
        if dropped:
            future.add_done_callback(lambda f: f.cancelled() and self.send(dropped(msg.key)))
        return future

    async def _read(self) -> None:
        while True:
            try:
                frames = await asyncio.wait_for(self.sock.recv_multipart(), SILENCE_S if self.ready.done() else None)
                self._dispatch(wire.loads(frames))
            except asyncio.CancelledError:
                raise
            except asyncio.TimeoutError:
                return self._fail(f"the engine core sent nothing for {SILENCE_S:g} s")
            except Exception:
                if self.sock.closed:       # close()'s cancel lost by wait_for to a message that came with it (3.11)
                    return
                log.exception("a message from the engine core could not be read")

    def _dispatch(self, messages: list) -> None:
        for msg in messages:
            if (handler := self.handlers.get(type(msg))) is None:
                log.error("the engine core sent an unknown message: %s", type(msg).__name__)
            else:
                handler(msg)

    def _on_chunks(self, msg: Chunks) -> None:
        if self.arrived is not None:
            self.arrived(time.monotonic(), msg.taken_at, [head[5] for head in msg.heads if head[5] and head[6]])
        for chunk in msg.unpack():
            if (handle := self.requests.get(chunk.id)) is not None:
                if chunk.chunk.final:
                    del self.requests[chunk.id]
                handle.put(chunk.chunk)

    def _on_failed(self, msg: Failed) -> None:
        if (handle := self.requests.pop(msg.id, None)) is not None:
            handle.put(msg.failure.exception())

    def _on_answer(self, msg: Answer) -> None:
        if (future := self.calls.pop(msg.key, None)) is not None and not future.done():
            future.set_exception(msg.result.exception()) if isinstance(msg.result, Failure) \
                else future.set_result(msg.result)

    def _on_stats(self, msg: Stats) -> None:
        self.latest_stats = msg.stats

    def _on_ready(self, msg: Ready) -> None:
        described = msg.description
        self.info, self.ids = described["info"], itertools.count(msg.first_id)
        self.aligner = RemoteAligner(self) if described["aligner"] else None
        self.voices.read(described["voices_dir"])
        self.validator = Validator(described["rules"], self.voices, described["max_text_chars"], described["check"])
        if not self.ready.done():
            self.ready.set_result(None)

    def _exited(self) -> None:
        asyncio.get_running_loop().remove_reader(self.process.sentinel)
        self.process.join(1)
        said = wire.failure_path(self.address)
        self._fail(said.read_text() if said.exists() else fatal.exited(self.process.exitcode))

    def _fail(self, reason: str) -> None:
        if self.failure:
            return
        self.failure = reason
        error = RuntimeError(reason)
        for handle in self.requests.values():
            handle.put(error)
        for future in self.calls.values():
            if not future.done():
                future.set_exception(error)
        self.requests.clear()
        self.calls.clear()
        if not self.ready.done():
            self.ready.set_exception(fatal.StartupError(reason))
        if self.on_failure:
            self.on_failure(self.failure)

    async def close(self, timeout: float = 30.0) -> None:
        if getattr(self, "sock", None) is None:
            return
        if self.process is not None:
            asyncio.get_running_loop().remove_reader(self.process.sentinel)
        if self.failure is None and self.core is not None:         # a core of our own
            self.send(Shutdown())
            await asyncio.sleep(0)
        if self.core is not None:
            await asyncio.to_thread(self.core.join, 0 if self.failure else timeout)
            if self.process is not None and self.process.is_alive():
                self.process.kill()
        self.reader.cancel()
        self.sock.close()
        self.ctx.term()
        for path in (self.address.removeprefix("ipc://"), wire.failure_path(self.address)):
            if os.path.exists(path):
                os.unlink(path)
