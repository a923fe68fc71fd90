"""A load client process: its share of one level's contexts on many sockets in one event loop (closed loop or
Poisson arrivals), the contexts that start inside the steady-state window, and its own health."""
import asyncio
import math
import random
import time
import traceback
from dataclasses import dataclass

from bench import load_dialects
from bench.client_health import watch_health
from bench.load_socket import LoadSocket, Speech, Tally
from qwen_tts_client import protocol as p

BUSY_BACKOFF_S = 0.2          # a closed-loop slot refused with `busy` waits this long before its next context
CONNECTING_AT_ONCE = 64


@dataclass
class ClientJob:
    url: str
    headers: dict
    compression: str | None
    speech: Speech
    texts: list[str]
    concurrency: int = 0          # closed loop: this many contexts at once, each slot's back to back
    rate: float = 0.0             # Poisson: this many context arrivals per second
    contexts_per_socket: int = 1
    warmup: float = 15.0          # from the start to the window's start
    ramp: float = 10.0            # closed loop: the slots' first contexts start spread over this many seconds
    burst: bool = False           # closed loop: the counted contexts are the slots' first ones, not the window's
    duration: float = 30.0
    drain_timeout: float = 120.0  # after the window, the most to wait for the window's contexts to end
    seed: int = 0
    dialect: str = "ours"         # what the sockets speak: bench/load_dialects.py
    sample_rate: int = 24000
    encoding: str = "pcm_s16le"


def run_client(job: ClientJob, barrier, conn) -> None:
    """A client process's entry point: sends back its result, or its failure."""
    try:
        conn.send(asyncio.run(ClientRun(job).run(barrier)))
    except BaseException:
        barrier.abort()                                  # the other processes stop waiting for this one
        conn.send(dict(failed=traceback.format_exc()))


class ClientRun:
    def __init__(self, job: ClientJob):
        self.job, self.tally, self.rng = job, Tally(), random.Random(job.seed)
        self.sockets: list[LoadSocket] = []
        self.counted = []                                # the contexts that started inside the window
        self.tasks: set[asyncio.Task] = set()
        self.connecting = asyncio.Semaphore(CONNECTING_AT_ONCE)

    async def run(self, barrier) -> dict:
        job = self.job
        self.sockets = await asyncio.gather(*(self.connect() for _ in range(
            math.ceil((job.concurrency or job.rate) / job.contexts_per_socket))))
        if self.sockets[0].max_contexts < job.contexts_per_socket:
            raise ValueError(f"the server takes {self.sockets[0].max_contexts} contexts per socket")
        await asyncio.to_thread(barrier.wait)
        self.tally.start = time.perf_counter() + job.warmup
        self.tally.end = self.tally.start + job.duration
        health = asyncio.create_task(watch_health(self.tally.start, self.tally.end))
        driver = asyncio.create_task(self.closed_loop() if job.concurrency else self.poisson())
        await self.drain(driver)
        driver.cancel()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*(sock.close() for sock in self.sockets), return_exceptions=True)
        return dict(contexts=[(c.record, c.code, c.words_error) for c in self.counted],
                    refusals=[c.error for c in self.counted if c.code == p.BUSY and c.error],
                    words_reasons=[c.words_reason for c in self.counted if c.words_error],
                    window_audio_s=self.tally.audio_s, stray_errors=dict(self.tally.stray_errors),
                    sockets=len(self.sockets), health=await health)

    async def connect(self) -> LoadSocket:
        async with self.connecting:
            wire = load_dialects.wire(self.job.dialect, self.job.speech.options, self.job.sample_rate,
                                      self.job.encoding)
            return await LoadSocket.open(self.job.url, self.job.headers, self.job.compression, self.tally, wire)

    async def drain(self, driver: asyncio.Task) -> None:
        """Until the window has passed and every context that started in it has ended; the load stays on meanwhile."""
        deadline = self.tally.end + self.job.drain_timeout
        while (now := time.perf_counter()) < self.tally.end or not all(c.ended.done() for c in self.counted):
            if driver.done():
                driver.result()                          # raises what stopped the load
            if now > deadline:
                for ctx in self.counted:
                    ctx.finish("unfinished")
            await asyncio.sleep(0.05)

    def launch(self, sock: LoadSocket, first: bool = False):
        """Opens a context on `sock` now (counted when inside the window, or a burst's `first`); the coroutine returned
        speaks it."""
        text = self.rng.choice(self.job.texts)
        ctx = sock.open_context(len(text))
        if first if self.job.burst else self.tally.start <= time.perf_counter() < self.tally.end:
            self.counted.append(ctx)
        return sock.speak(ctx, text, self.job.speech)

    async def closed_loop(self) -> None:
        k = self.job.contexts_per_socket
        await asyncio.gather(*(self.slot(self.sockets[i // k], self.rng.uniform(0, self.job.ramp))
                               for i in range(self.job.concurrency)))

    async def slot(self, sock: LoadSocket, delay: float) -> None:
        await asyncio.sleep(delay)
        first = True
        while True:
            ctx, first = await self.launch(sock, first), False
            if ctx.code == "socket_closed":
                return
            if ctx.code == p.BUSY:
                await asyncio.sleep(BUSY_BACKOFF_S)

    async def poisson(self) -> None:
        """Arrivals at `rate`, each context on the first socket with a free place (a new socket when none has)."""
        at = time.perf_counter()
        while True:
            at += self.rng.expovariate(self.job.rate)
            await asyncio.sleep(at - time.perf_counter())
            sock = next((s for s in self.sockets if len(s.contexts) < self.job.contexts_per_socket
                         and not s.reader.done()), None)
            if sock is None:
                sock = await self.connect()
                self.sockets.append(sock)
            task = asyncio.create_task(self.launch(sock))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
