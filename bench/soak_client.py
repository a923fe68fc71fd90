"""A soak client process: closed-loop slots of streamed contexts for a fixed time, some cancelled mid-way and some
sockets dropped without a close (a TCP abort), every context's ending counted."""
import asyncio
import random
import time
import traceback
from collections import Counter
from dataclasses import dataclass

import websockets

from bench.load_dialects import Ours
from bench.load_socket import LoadSocket, Speech, Tally
from qwen_tts_client import protocol as p


@dataclass
class SoakJob:
    url: str
    speech: Speech
    texts: list[str]
    slots: int
    duration: float
    cancel: float = 0.15          # the share of contexts cancelled 0.2-3 s after their first text
    abort: float = 0.02           # the share of contexts whose socket is aborted 0.2-3 s after their first text
    seed: int = 0


def run_soak_client(job: SoakJob, conn) -> None:
    try:
        conn.send(asyncio.run(SoakRun(job).run()))
    except BaseException:
        conn.send(dict(failed=traceback.format_exc()))


class SoakRun:
    def __init__(self, job: SoakJob):
        self.job, self.rng, self.tally = job, random.Random(job.seed), Tally(start=0.0)
        self.endings, self.provoked = Counter(), Counter()

    async def run(self) -> dict:
        deadline = time.perf_counter() + self.job.duration
        await asyncio.gather(*(self.slot(deadline, self.rng.uniform(0, 10)) for _ in range(self.job.slots)))
        return dict(endings=dict(self.endings), provoked=dict(self.provoked), audio_s=self.tally.audio_s,
                    stray_errors=dict(self.tally.stray_errors))

    async def slot(self, deadline: float, delay: float) -> None:
        await asyncio.sleep(delay)
        sock = None
        while time.perf_counter() < deadline:
            if sock is None or sock.reader.done():
                sock = await LoadSocket.open(self.job.url, {}, None, self.tally, Ours(self.job.speech.options, 0, ""))
            await self.context(sock)
        if sock is not None:
            await sock.close()

    async def context(self, sock: LoadSocket) -> None:
        text = self.rng.choice(self.job.texts)
        ctx = sock.open_context(len(text))
        roll, after = self.rng.random(), self.rng.uniform(0.2, 3.0)
        mischief = "cancelled" if roll < self.job.cancel else \
            "socket_closed" if roll < self.job.cancel + self.job.abort else None
        speaking = asyncio.create_task(sock.speak(ctx, text, self.job.speech))
        if mischief:
            await asyncio.wait([speaking], timeout=after)
            if not speaking.done():
                self.provoked[mischief] += 1
                if mischief == "cancelled":
                    ctx.finish("cancelled")              # as a client would: no more text for it
                    await self._send(sock, p.Cancel(ctx.id))
                else:
                    sock.ws.transport.abort()
        await speaking
        ending = ctx.code or "done"
        self.endings[ending] += 1
        if ending == p.BUSY:
            await asyncio.sleep(0.2)

    @staticmethod
    async def _send(sock: LoadSocket, message) -> None:
        try:
            await sock.ws.send(p.encode(message))
        except websockets.ConnectionClosed:
            pass
