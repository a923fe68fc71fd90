"""The chunk relay out of the engine core, the device taken out (a diagnostic on the CPU, not a GPU figure): the host
bench's streams and steps (bench/host_bench.py: the real scheduler, step and output over a hollow model, text in
pieces) hand their chunks to the real core I/O thread (gateway/engine_process/io_loop.py) as the engine thread does,
and a reader process in a front end's place reads them. Each step waits for the device, the GIL released, where the
engine thread waits for the last talk's ids, until --step-ms have passed. Per chunk: the engine's send to its batch's
join (`core`) and to the reader (`arrival`), as gather_runs reports them from a serve's /metrics.

python bench/relay_bench.py --streams 1792 --step-ms 62"""
import argparse
import multiprocessing as mp
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import zmq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.hollow_model import hollow  # noqa: E402
from bench.host_bench import Talkers  # noqa: E402
from engine import Engine  # noqa: E402
from engine.core import step as step_module  # noqa: E402
from engine.models import load_model  # noqa: E402
from gateway.engine_process import starts, wire  # noqa: E402
from gateway.engine_process.dispatch import Delivery  # noqa: E402
from gateway.engine_process.io_loop import CoreIOLoop  # noqa: E402
from gateway.engine_process.messages import Chunks, Hello  # noqa: E402

READER = b"reader"


def read(address: str, stop, out) -> None:
    """A front end's read of the core's batches until `stop` is set: each chunk's seconds from its send to the read
    and to its join."""
    ctx = zmq.Context()
    sock = wire.socket(ctx, zmq.DEALER, READER)
    sock.connect(address)
    sock.send_multipart(wire.dumps([Hello(os.getpid())]))
    arrival, core = [], []
    while not stop.is_set():
        if sock.poll(100):
            frames = sock.recv_multipart()
            now = time.monotonic()
            for msg in wire.loads(frames):
                if type(msg) is Chunks:
                    sent = [head[5] for head in msg.heads if head[5] and head[6]]
                    arrival += [now - s for s in sent]
                    core += [msg.taken_at - s for s in sent]
    sock.close(linger=0)
    ctx.term()
    out.put((arrival, core))


class Both:
    """A context's handle here: the core's delivery, and the host bench's own (its talkers open the next context)."""
    __slots__ = ("core", "local")

    def __init__(self, core, local):
        self.core, self.local = core, local

    def deliver(self, item) -> None:
        self.core.deliver(item)
        self.local.deliver(item)


class CoreTalkers(Talkers):
    """The host bench's contexts, their chunks delivered as the engine core delivers them."""

    def __init__(self, engine, core: CoreIOLoop, streams: int):
        self.core = core
        super().__init__(engine, streams, 4, 0.015, 500, False)

    def handle(self, seq_id: int):
        return Both(Delivery(self.core.pending.append, READER, seq_id, set()), super().handle(seq_id))


def run(streams: int, step_ms: float, steps: int, dummy: str = "tiny") -> tuple[list[float], list[float], list[float]]:
    """-> each chunk's seconds from the engine's send to the reader, and to its batch's join; each measured step's
    engine-thread CPU seconds (its device wait out)."""
    engine = Engine(hollow(load_model(dummy=dummy)), max_active=streams, kv_tokens_per_stream=640, use_graphs=False)
    engine.runner.kv.locate = lambda *args, **kwargs: None
    engine.is_alive = lambda: True               # its steps run here, not on its own thread
    address = starts.address()
    results, stop = mp.Queue(), mp.Event()
    reader = mp.Process(target=read, args=(address, stop, results))
    reader.start()                               # forked before any thread of ours: it connects once the core binds
    core = CoreIOLoop(engine, None, address)
    serving = threading.Thread(target=core.serve, daemon=True)
    serving.start()
    while READER not in core.dispatch.peers:
        time.sleep(0.05)
    deadline, wait, ready = [0.0], step_module.HostCopy.wait, step_module.HostCopy.ready

    def device_wait(self):                       # the last talk's ids: the GIL free until the step's time is up
        time.sleep(max(0.0, deadline[0] - time.monotonic()))
        return wait(self)
    step_module.HostCopy.wait = device_wait
    step_module.HostCopy.ready = lambda self: time.monotonic() >= deadline[0]
    try:
        talkers = CoreTalkers(engine, core, streams)
        talkers.next_tick = time.monotonic()
        thread, sched, done, full, host = engine.thread, engine.scheduler, 0, False, []
        while done < steps:
            talkers.tick_until(time.monotonic())
            deadline[0] = time.monotonic() + step_ms / 1000
            cpu = time.thread_time()
            engine.step.read_talk()     # as the engine thread: the last talk read before the inbox
            thread.drain()
            core.delivered()
            thread.isolation.run(engine.step.run)
            core.delivered()
            cpu = time.thread_time() - cpu
            time.sleep(max(0.0, deadline[0] - time.monotonic()))
            talkers.collect()
            full = full or len(sched.running) == streams
            done += full
            host += [cpu] * full
    finally:
        step_module.HostCopy.wait, step_module.HostCopy.ready = wait, ready
    time.sleep(0.5)                              # the last batches reach the reader
    stop.set()
    arrival, joined = results.get()
    reader.join()
    core.stop()
    serving.join()
    return arrival, joined, host


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--streams", type=int, default=1792)
    p.add_argument("--step-ms", type=float, default=62.0, help="the device's step: each step lasts this long")
    p.add_argument("--steps", type=int, default=150, help="steps measured, after every stream has joined")
    p.add_argument("--dummy", default="tiny")
    a = p.parse_args()
    arrival, joined, host = run(a.streams, a.step_ms, a.steps, a.dummy)
    ms = lambda xs: f"mean {1000 * statistics.mean(xs):.1f} p90 {1000 * statistics.quantiles(xs, n=10)[-1]:.1f} ms"
    print(f"{a.streams} streams, {a.step_ms:g} ms steps: core {ms(joined)}, arrival {ms(arrival)} "
          f"({len(arrival)} chunks); the engine thread's CPU a step {ms(host)}")


if __name__ == "__main__":
    main()
