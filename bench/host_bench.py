"""The engine thread's host work per step at many streamed streams, the model's device work taken out (a
diagnostic on the CPU, not a GPU figure): the real scheduler, runner, step and output path over a hollow model
(bench/hollow_model.py), text arriving in pieces as the gateway delivers it (one Batch of AppendText per tick),
listeners playing in real time on a fake clock that moves one GPU step per step, closed loop. `--ipc`: a thread
beside it pickles what the step delivers for the socket, as the engine core's I/O thread does (wire.dumps), so the
step's wall time (`wall_ms_per_step`) shows what that thread's GIL costs it.

python bench/host_bench.py --streams 512 1024 2048 --json out.json [--profile 25] [--ipc]"""
import argparse
import cProfile
import itertools
import json
import pstats
import queue
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.hollow_model import hollow  # noqa: E402
from bench.workload import texts  # noqa: E402
from engine import Engine, SynthesisRequest  # noqa: E402
from engine.api.commands import AppendText, Batch, CloseText  # noqa: E402
from engine.models import load_model  # noqa: E402
from gateway.engine_process import wire  # noqa: E402
from gateway.engine_process.messages import Chunk, Chunks  # noqa: E402
from tests.fake_clock import FakeClock  # noqa: E402


class Outbox:
    """A stream's chunks go where the engine core's would: a queue another thread empties."""
    __slots__ = ("id", "put")

    def __init__(self, seq_id: int, put):
        self.id, self.put = seq_id, put

    def deliver(self, item) -> None:
        self.put((self.id, item))


class Sender(threading.Thread):
    """--ipc: the engine core's I/O thread: what was delivered since its last wake-up, pickled as one batch."""

    def __init__(self, forward):
        super().__init__(daemon=True)
        self.inbox, self.forward = queue.SimpleQueue(), forward

    def run(self) -> None:
        while True:
            items = [self.inbox.get()]
            while not self.inbox.empty():
                items.append(self.inbox.get_nowait())
            wire.dumps(Chunks.gather([Chunk(i, item) for i, item in items if not isinstance(item, Exception)]))
            for item in items:
                self.forward(item)


class Talkers:
    """`streams` contexts, each sending its text in `piece`-character pieces every `every_s`; one that ends is
    replaced by a new one at once (closed loop)."""

    def __init__(self, engine, streams: int, piece: int, every_s: float, max_chars: int, ipc: bool, seed: int = 0):
        self.engine, self.piece, self.every_s = engine, piece, every_s
        self.texts = itertools.cycle(texts(4 * streams, seed, max_chars=max_chars))
        self.ids, self.sent = itertools.count(1), {}
        self.outbox = queue.SimpleQueue()
        self.deliver = self.outbox.put
        if ipc:
            sender = Sender(self.outbox.put)
            sender.start()
            self.deliver = sender.inbox.put
        self.next_tick, self.errors, self.chunks, self.reasons = 0.0, [], 0, Counter()
        self.pending = [self._open() for _ in range(streams)]

    def _open(self):
        seq_id = next(self.ids)
        request = self.engine.validator.prepare(SynthesisRequest(text="", text_complete=False))
        self.sent[seq_id] = [next(self.texts), 0]
        return self.engine.sequence(seq_id, request, self.handle(seq_id))

    def handle(self, seq_id: int):
        return Outbox(seq_id, self.deliver)

    def tick_until(self, now: float) -> None:
        """Every tick due by `now`: one Batch (the gateway's per event-loop turn) of each context's next piece."""
        while self.next_tick <= now:
            commands, self.pending = self.pending, []
            for seq_id, state in self.sent.items():
                text, at = state
                if at < len(text):
                    commands.append(AppendText(seq_id, text[at:at + self.piece]))
                    state[1] = at + self.piece
                    if state[1] >= len(text):
                        commands.append(CloseText(seq_id))
            self.engine.inbox.put(Batch(commands))
            self.next_tick += self.every_s

    def collect(self) -> None:
        while True:
            try:
                seq_id, item = self.outbox.get_nowait()
            except queue.Empty:
                return
            self.chunks += 1
            if isinstance(item, Exception) or item.final:
                if isinstance(item, Exception):
                    self.errors.append(repr(item))
                else:
                    self.reasons[item.finish_reason] += 1
                del self.sent[seq_id]
                self.pending.append(self._open())


def run_level(streams: int, args) -> dict:
    clock = FakeClock()
    engine = Engine(hollow(load_model(dummy=args.dummy)), max_active=streams, kv_tokens_per_stream=args.kv_tokens,
                    clock=clock, use_graphs=False)
    engine.runner.kv.locate = lambda *args, **kwargs: None      # inside the captured talk graph on a GPU
    talkers = Talkers(engine, streams, args.piece, args.every_ms / 1000, args.max_chars, args.ipc)
    thread, step, sched = engine.thread, engine.step, engine.scheduler
    profile = cProfile.Profile() if args.profile else None
    host, wall, running, warm = [], [], [], 0
    while len(host) < args.steps:
        talkers.tick_until(clock.now)
        measured = warm >= args.warmup
        t0, w0 = time.thread_time(), time.perf_counter()
        if measured and profile:
            profile.enable()
        step.read_talk()                # as the engine thread: the last talk read before the inbox
        thread.drain()
        thread.isolation.run(step.run)
        if measured and profile:
            profile.disable()
        spent = time.thread_time() - t0
        if measured:
            host.append(spent)
            wall.append(time.perf_counter() - w0)
            running.append(len(sched.running))
        warm += len(sched.running) == streams or warm > 0
        clock.advance(args.step_ms / 1000)
        talkers.collect()
    engine.shutdown()
    ms = sorted(1000 * h for h in host)
    row = dict(streams=streams, steps=len(host), running_mean=round(statistics.mean(running), 1),
               host_ms_per_step_mean=round(statistics.mean(ms), 2), host_ms_per_step_p50=round(ms[len(ms) // 2], 2),
               host_ms_per_step_p90=round(ms[int(0.9 * (len(ms) - 1))], 2), host_ms_per_step_max=round(ms[-1], 2),
               host_us_per_stream=round(1000 * statistics.mean(ms) / statistics.mean(running), 2),
               wall_ms_per_step=round(1000 * statistics.mean(wall), 2),
               ended=dict(talkers.reasons), chunks=talkers.chunks, errors=talkers.errors[:5],
               listener_dry=step.audio.dry)
    if profile:
        row["profile"] = top_functions(profile, len(host), args.profile)
    return row


def top_functions(profile: cProfile.Profile, steps: int, top: int) -> list:
    """cProfile's own time per step (it slows what it watches: read the shares, not the sums)."""
    rows = sorted(pstats.Stats(profile).stats.items(), key=lambda kv: -kv[1][2])[:top]
    return [dict(ms_per_step=round(1000 * tt / steps, 3), cum_ms=round(1000 * ct / steps, 3),
                 where=f"{Path(file).name}:{line} {name}") for (file, line, name), (_, _, tt, ct, _) in rows]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--streams", type=int, nargs="+", default=[512, 1024, 2048])
    p.add_argument("--dummy", default="tiny", help="the model whose tokenizer and prompts serve (its stages hollow)")
    p.add_argument("--piece", type=int, default=4, help="characters a text piece")
    p.add_argument("--every-ms", type=float, default=15.0, help="a piece from every context this often")
    p.add_argument("--step-ms", type=float, default=64.0, help="the fake clock's advance per step: the GPU's step")
    p.add_argument("--max-chars", type=int, default=500, help="texts of 20..max_chars characters")
    p.add_argument("--kv-tokens", type=int, default=640, help="KV tokens a stream (open-length text reserves 512+)")
    p.add_argument("--warmup", type=int, default=100, help="steps after every stream has joined, before measuring")
    p.add_argument("--steps", type=int, default=50, help="steps measured")
    p.add_argument("--profile", type=int, default=0, metavar="TOP", help="cProfile the measured steps: top functions")
    p.add_argument("--ipc", action="store_true", help="a thread beside the step pickles its chunks for the socket")
    p.add_argument("--json")
    args = p.parse_args()
    rows = []
    for streams in args.streams:
        rows.append(run_level(streams, args))
        row = rows[-1]
        print(f"{streams:5d} streams: host {row['host_ms_per_step_mean']:7.2f} ms/step (p50 "
              f"{row['host_ms_per_step_p50']}, p90 {row['host_ms_per_step_p90']}, max "
              f"{row['host_ms_per_step_max']}), {row['host_us_per_stream']} us/stream, wall "
              f"{row['wall_ms_per_step']} ms/step, {sum(row['ended'].values())} ended, {len(row['errors'])} errors",
              flush=True)
        for f in row.get("profile", []):
            print(f"    {f['ms_per_step']:8.3f} {f['cum_ms']:8.3f}  {f['where']}")
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
