"""The front end's engine: the engine core behind a ZMQ socket; it never blocks the event loop."""
import asyncio
import itertools
import logging
import multiprocessing
import os
import uuid
from concurrent.futures import Future

import zmq
import zmq.asyncio

from engine.api.handle import RequestHandle
from engine.api.validate import Validator

from .. import fatal
from . import wire
from .remote import RemoteAligner, VoiceNames

log = logging.getLogger("qwen_tts_gateway")
SILENCE_S = 10.0           # the core sends stats every 0.1 s: this long without a word, it is gone


class EngineClient:
    def __init__(self, start_worker, address: str):
        """`start_worker` starts the core; returns its Process, its Thread, or None (another front end's core)."""
        self.start_worker, self.address = start_worker, address
        self.requests: dict[int, RequestHandle] = {}
        self.calls: dict[int, asyncio.Future | Future] = {}
        self.ids = itertools.count(1)
        self.pending: list = []
        self.voices, self.stats = VoiceNames(), {}
        self.info = self.validator = self.worker = self.on_failure = self.failure = None
        self.aligner: RemoteAligner | None = None
        self.identity = uuid.uuid4().bytes

    @property
    def process(self):
        return self.worker if isinstance(self.worker, multiprocessing.process.BaseProcess) else None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.ready = loop.create_future()
        self.ctx = zmq.asyncio.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.IDENTITY, self.identity)
        for option in (zmq.SNDHWM, zmq.RCVHWM, zmq.LINGER):
            self.sock.setsockopt(option, 0)
        self.sock.connect(self.address)
        self.worker = await asyncio.to_thread(self.start_worker)
        if self.process is not None:
            loop.add_reader(self.process.sentinel, self._exited)
        self.reader = asyncio.create_task(self._read())
        self.send(("hello",))
        await self.ready

    def submit(self, request) -> RequestHandle:
        request = self.validator.prepare(request)
        if self.failure:
            raise RuntimeError(self.failure)
        handle = RequestHandle(self, next(self.ids), self.validator.check_append)
        self.requests[handle.id] = handle
        self.send(("add", handle.id, request))
        return handle

    def append_text(self, rid: int, text: str) -> None:
        self.send(("append", rid, text))

    def close_text(self, rid: int) -> None:
        self.send(("close", rid))

    def cancel(self, rid: int) -> None:
        """The request's last chunk (`cancelled`) or error still comes, and ends its handle."""
        if rid in self.requests:
            self.send(("cancel", rid))

    def register_voice(self, name: str, ref) -> asyncio.Future:
        return self._call("voice", name, ref)

    def delete_voice(self, name: str) -> asyncio.Future:
        return self._call("delete_voice", name)

    def voice_names(self) -> list[str]:
        return self.voices.names()

    def send(self, msg: tuple) -> None:
        self.pending.append(msg)
        if len(self.pending) == 1:
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        msgs, self.pending = self.pending, []
        if not self.failure:
            self.sock.send(wire.dumps(msgs), copy=False)

    def _call(self, kind: str, *args, future=None, dropped: str | None = None):
        """`dropped`: the message that tells the core a cancelled call's work is no longer wanted."""
        key = next(self.ids)
        future = future or asyncio.get_running_loop().create_future()
        if self.failure:
            future.set_exception(RuntimeError(self.failure))
            return future
        self.calls[key] = future
        self.send((kind, key, *args))
        if dropped:
            future.add_done_callback(lambda f: f.cancelled() and self.send((dropped, key)))
        return future

    def other_reports(self) -> list[dict]:
        return [r for peer, r in self.stats.get("frontends", {}).items() if peer != self.identity.hex()]

    async def _read(self) -> None:
        while True:
            try:
                data = await asyncio.wait_for(self.sock.recv(), SILENCE_S if self.ready.done() else None)
                self._dispatch(wire.loads(data))
            except asyncio.CancelledError:
                raise
            except asyncio.TimeoutError:
                return self._fail(f"the engine core sent nothing for {SILENCE_S:g} s")
            except Exception:
                log.exception("a message from the engine core could not be read")

    def _dispatch(self, messages: list) -> None:
        for kind, key, *rest in messages:
            if kind == "chunk":
                if (handle := self.requests.get(key)) is not None:
                    if rest[0].final:
                        del self.requests[key]
                    handle.put(rest[0])
            elif kind == "error":
                if (handle := self.requests.pop(key, None)) is not None:
                    handle.put(rest[0].exception())
            elif kind in ("voice", "aligned"):
                if (future := self.calls.pop(key, None)) is not None and not future.done():
                    result = rest[0]
                    future.set_exception(result.exception()) if isinstance(result, wire.Failure) \
                        else future.set_result(result)
            elif kind == "stats":
                self.stats = key
            elif kind == "voices":
                self.voices.known = key
            elif kind == "ready":
                self._ready(key)

    def _ready(self, description: dict) -> None:
        self.info = description["info"]
        self.aligner = RemoteAligner(self) if description["aligner"] else None
        self.voices.read(description["voices_dir"])
        self.validator = Validator(description["rules"], self.voices, description["max_text_chars"],
                                   description["check"])
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
        if self.failure is None and self.worker is not None:       # a core of our own
            self.send(("shutdown",))
            await asyncio.sleep(0)
        if self.worker is not None:
            await asyncio.to_thread(self.worker.join, 0 if self.failure else timeout)
            if self.process is not None and self.process.is_alive():
                self.process.kill()
        self.reader.cancel()
        self.sock.close()
        self.ctx.term()
        for path in (self.address.removeprefix("ipc://"), wire.failure_path(self.address)):
            if os.path.exists(path):
                os.unlink(path)
