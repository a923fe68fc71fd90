"""Forced-aligner cost and streamed word timestamps beside the TTS engine, on one device.

1. Cost: one batched forward of (window audio, its words) per batch size and window length: aligner time per
   second of audio.
2. Streams: `c` concurrent TTS streams (forced lengths, as engine_bench), run with alignment off and on. With
   alignment on, every stream feeds its audio to a LiveWords on the shared AlignmentService, as the gateway's
   contexts do. Lead of a word = (first chunk's arrival + word end) - the moment it settled: how long before a
   real-time player reaches the word's end its timestamp is known. With random weights the model's times are
   arbitrary, so by default the stand-in times of a speaker who says the text evenly over the stream's audio
   (the model still runs every job, for the cost); `--times model` keeps the model's times (real checkpoints).

The engine loads first (as in the gateway), so the aligner captures its CUDA graphs with the engine's compiled layer
kernels and cuDNN settings; `--eager` runs the aligner without graphs, for comparison. `--front-end cudnn
channels_last gemm` loads the aligner once with each conv front end (aligner/front_end.py) for the cost table and the
kernel listings (the levels run the first); `--concurrency` with no level measures only those.

python3 bench/aligner_bench.py --dummy [--tts-dummy 1.7B-CustomVoice] [--concurrency 1 64] [--eager] [--json out.json]"""
import argparse
import asyncio
import contextlib
import cProfile
import gc
import json
import os
import pstats
import sys
import threading
import time
import types
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aligner import Aligner, AlignmentService, LiveWords  # noqa: E402
from aligner.audio_encoder import CHUNK, CONV_SLOTS  # noqa: E402
from aligner.front_end import DEFAULT, FRONT_ENDS  # noqa: E402
from bench.aligner_flow import even_speaker, stand_in  # noqa: E402
from bench.metrics import StreamRecord, summarize  # noqa: E402
from bench.stage_bench import kernel_table  # noqa: E402
from bench.workload import WORDS, workload  # noqa: E402
from engine import Engine, SamplingParams, SynthesisRequest  # noqa: E402


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


class Span:
    """Stands in for the engine's turns in align_units: every slice in one turn, timed: the host's time before the
    turn (layouts, ids, staging), and the device's between the turn's first and last kernel (CUDA events), with the
    mel queued before it."""

    def __init__(self):
        self.t0, self.asked, self.marks = time.perf_counter(), None, []

    @contextlib.contextmanager
    def __call__(self, weights):
        self.asked = self.asked or time.perf_counter()
        yield len(weights), types.SimpleNamespace(after=None, end=self.end)

    def end(self, done=None, started=None, beside=None) -> None:
        self.marks += ([tuple(beside)] if beside else []) + [(started, done)]

    def device_ms(self) -> float:
        if not self.marks or self.marks[0][0] is None:
            return 0.0
        self.marks[-1][1].synchronize()
        return sum(a.elapsed_time(b) for a, b in self.marks)


def cost(aligner: Aligner, batches: list[int], windows: list[float], repeat: int = 5) -> list[dict]:
    rng, rows = np.random.default_rng(0), []
    for seconds in windows:
        for b in batches:
            items = [((0.1 * rng.standard_normal(int(seconds * 24000))).astype(np.float32),
                      list(rng.choice(WORDS, max(1, round(2.5 * seconds))))) for _ in range(b)]
            aligner.align_units(items, 24000)
            sync()
            t0, spans = time.perf_counter(), []
            for _ in range(repeat):
                spans.append(Span())
                aligner.align_units(items, 24000, spans[-1])
            ms = (time.perf_counter() - t0) / repeat * 1000
            host = float(np.mean([s.asked - s.t0 for s in spans])) * 1000
            device = float(np.mean([s.device_ms() for s in spans]))
            rows.append(dict(window_s=seconds, batch=b, ms=ms, ms_per_audio_s=ms / (b * seconds), host_ms=host,
                             device_ms=device, device_ms_per_audio_s=device / (b * seconds)))
            print(f"cost  window {seconds:4.1f} s  batch {b:3d}  {ms:8.1f} ms  {ms / (b * seconds):7.2f} ms per "
                  f"audio-s (host before the turn {host:.1f} ms, the turn on the device {device:.1f} ms: "
                  f"{device / (b * seconds):.3f} ms per audio-s)", flush=True)
    return rows


def mixed_batch(aligner: Aligner) -> list:
    """The timestamps of a batch of mixed lengths."""
    rng = np.random.default_rng(1)
    return aligner.align_units([((0.1 * rng.standard_normal(int(s * 24000))).astype(np.float32),
                                 list(rng.choice(WORDS, n)))
                                for s, n in [(0.5, 2), (2.3, 6), (4.0, 9), (9.7, 20), (17.2, 40), (3.3, 12)]], 24000)


def graphs_match_eager(aligner: Aligner) -> bool:
    """The captured graphs give the eager forward's timestamps on a mixed batch."""
    graphed = mixed_batch(aligner)
    with without_graphs(aligner):
        return graphed == mixed_batch(aligner)


@contextlib.contextmanager
def without_graphs(aligner: Aligner):
    stages = aligner.model.encoder + aligner.model.text
    kept = [stage.graphs for stage in stages]
    for stage in stages:
        stage.graphs = {}
    try:
        yield
    finally:
        for stage, graphs in zip(stages, kept):
            stage.graphs = graphs


def kernels(aligner: Aligner, batch: int, seconds: float = 4.0) -> dict:
    """The kernels of one eager forward of `batch` windows (the graphs replay the same ones)."""
    rng = np.random.default_rng(2)
    items = [((0.1 * rng.standard_normal(int(seconds * 24000))).astype(np.float32),
              list(rng.choice(WORDS, max(1, round(2.5 * seconds))))) for _ in range(batch)]
    with without_graphs(aligner):
        return kernel_table(f"aligner forward, {batch} x {seconds} s", lambda: aligner.align_units(items, 24000),
                            top=45)


@torch.inference_mode()
def front_end_kernels(aligner: Aligner, chunks: int) -> dict:
    """The kernels of the conv front end alone over `chunks` chunk slots (a 64 x 4 s forward has 256), in its passes."""
    encoder = aligner.model.thinker.audio_tower
    weight = encoder.conv2d1.weight
    x = torch.randn(chunks, encoder.cfg.num_mel_bins, CHUNK, dtype=weight.dtype, device=weight.device)
    frames = torch.full((chunks,), CHUNK, device=weight.device)
    frames[3::4] = 37                                        # a window's last chunk: partial
    return kernel_table(f"conv front end {encoder.front_end}, {chunks} chunks",
                        lambda: [encoder.downsample(x[i:i + CONV_SLOTS], frames[i:i + CONV_SLOTS])
                                 for i in range(0, chunks, CONV_SLOTS)], top=20)


def measure(args, front_end: str, first: list | None) -> tuple[Aligner, dict]:
    """The aligner loaded with `front_end`: its load, the graphs' check, the cost table and the kernel listings; and
    the share of the mixed batch's timestamps equal to `first`'s (the first front end's)."""
    t0 = time.perf_counter()
    aligner = Aligner.load(model=args.model, dummy=args.dummy, device=args.device,
                           graphs=False if args.eager else None, front_end=front_end)
    graphs = sum(len(stage.graphs) for stage in aligner.model.encoder + aligner.model.text)
    out = dict(graphs=graphs, load_s=time.perf_counter() - t0, timestamps=mixed_batch(aligner))
    print(f"aligner {aligner.name} ({front_end} front end): {graphs} CUDA graphs, loaded in {out['load_s']:.1f} s",
          flush=True)
    if graphs:
        out["graphs_match_eager"] = graphs_match_eager(aligner)
        print(f"graphs give the eager forward's timestamps: {out['graphs_match_eager']}", flush=True)
    if first is not None:
        pairs = [(a, b) for row, ref in zip(out["timestamps"], first) for a, b in zip(row, ref)]
        out["timestamps_as_first"] = float(np.mean([a == b for a, b in pairs]))
        print(f"timestamps as the first front end's: {out['timestamps_as_first']:.1%}", flush=True)
    out.update(cost=cost(aligner, args.batches, args.windows), kernels=[kernels(aligner, b) for b in args.kernels])
    if args.kernels:
        out["front_end_kernels"] = front_end_kernels(aligner, 256)
    return aligner, out


def profile_forwards(aligner: Aligner) -> cProfile.Profile:
    """Profile every align_units call (on the service's thread): where a forward's wall time goes; and CUDA events
    around each on its stream (`profiler.events`): its span on the device, beside the engine's kernels."""
    profiler, inner = cProfile.Profile(), aligner.align_units
    profiler.events = []

    def profiled(*args, **kwargs):
        profiler.enable()
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(2)] if torch.cuda.is_available() else []
        try:
            marks and marks[0].record(aligner.stream)
            return inner(*args, **kwargs)
        finally:
            marks and marks[1].record(aligner.stream)
            profiler.events.append(marks)
            profiler.disable()
    aligner.align_units = profiled
    return profiler


def report(profiler: cProfile.Profile) -> None:
    sync()
    spans = [a.elapsed_time(b) for a, b in profiler.events if a.query() and b.query()]
    if spans:
        print(f"aligner forwards on the device: {len(spans)}, span p50 {np.percentile(spans, 50):.1f} ms "
              f"p90 {np.percentile(spans, 90):.1f} ms", flush=True)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    profiler.clear()
    profiler.events = []


def thread_cpu() -> dict[str, float]:
    """CPU seconds used so far by the event loop's, the engine's and the aligner's threads (Linux). The CUDA driver
    spin-waits on the GPU inside these threads, so this bounds their Python time from above; InterpreterProbe
    measures whether they queue for the interpreter."""
    out = {}
    for t in threading.enumerate():
        if t.name in ("MainThread", "tts-engine", "aligner") and t.native_id:
            fields = Path(f"/proc/self/task/{t.native_id}/stat").read_text().rsplit(")", 1)[1].split()
            out[t.name] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


class InterpreterProbe:
    """A thread that sleeps 1 ms at a time: how late it wakes is how long a thread waits for the interpreter."""

    def __init__(self):
        self.late: list[float] = []
        threading.Thread(target=self._run, name="probe", daemon=True).start()

    def _run(self) -> None:
        while True:
            t = time.perf_counter()
            time.sleep(0.001)
            self.late.append(time.perf_counter() - t - 0.001)

    def take(self) -> dict:
        late, self.late = np.array(self.late or [0.0]) * 1000, []
        return dict(interpreter_wait_p50_ms=float(np.percentile(late, 50)),
                    interpreter_wait_p90_ms=float(np.percentile(late, 90)))


class EvenSpeaker:
    """The alignment service for one stream, answering every job (once the model has run it) with the times of a
    speaker who says the text evenly over the stream's forced length; `latencies`: each job's seconds from its
    submission to its answer."""

    def __init__(self, service, text: str, seconds: float, latencies: list):
        self.service, self.truth, self.latencies = service, even_speaker(text, seconds), latencies
        self.job = None

    def watch(self, stream) -> None:
        """Keeps the job the stream made last: LiveWords submits its audio and units, the answer needs its start."""
        make = stream.job

        def job(played_s: float = 0.0):
            self.job = make(played_s)
            return self.job
        stream.job = job

    def submit(self, audio, units, due=None) -> Future:
        job, out, t0 = self.job, Future(), time.perf_counter()

        def answer(done: Future) -> None:
            self.latencies.append(time.perf_counter() - t0)
            if not out.cancelled():
                out.set_exception(done.exception()) if done.exception() else out.set_result(stand_in(job, self.truth))
        self.service.submit(audio, units, due).add_done_callback(answer)
        return out

    def admit(self) -> Future:
        return self.service.admit()


async def one_stream(engine, service, text, frames, seed, times, leads, early, latencies) -> StreamRecord:
    rec = StreamRecord(time.perf_counter(), chars=len(text))
    handle = engine.submit(SynthesisRequest(text=text, max_frames=frames, ignore_eos=True,
                                            sampling=SamplingParams(seed=seed)))
    live, audio_done = None, []

    async def settled(words) -> None:
        now = time.monotonic()
        leads.extend((live.listener.started_at + w.end - now, w.end) for w in words)
        early.extend([not audio_done] * len(words))
    if service is not None:
        source = service if times == "model" else EvenSpeaker(service, text, frames * 0.08, latencies)
        live = LiveWords(source, "english", timeout=60.0, on_words=settled)
        if source is not service:
            source.watch(live.stream)
        live.add_text(text)
        live.close_utterance()
    async for chunk in handle:
        rec.arrivals.append(time.perf_counter())
        rec.samples.append(len(chunk.pcm))
        rec.sent.append(chunk.sent_at)
        if live is not None:
            audio_done += [True] * chunk.final
            live.add_audio(chunk.pcm, chunk.final)
    if live is not None:
        await live.settled()
        live.close()
    return rec


async def level(engine, service, c: int, items, times, probe: InterpreterProbe) -> dict:
    pending, records, leads, early, latencies = list(items), [], [], [], []

    async def worker():
        while pending:
            text, frames = pending.pop()
            records.append(await one_stream(engine, service, text, frames, len(records), times, leads, early,
                                            latencies))

    before = dict(service.stats, **{f"turns_{k}": v for k, v in engine.side_work.stats.items()}) if service else {}
    steps, frames, cpu, _ = engine.step.steps, engine.step.frames_total, thread_cpu(), probe.take()
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(c)))
    wall = time.perf_counter() - t0
    cpu = {name: round((t - cpu.get(name, 0.0)) / wall, 3) for name, t in thread_cpu().items()}
    audio_wall = max(r.arrivals[-1] for r in records) - t0    # the TTS's part: words may settle later
    row = dict(concurrency=c, align=service is not None, **summarize(records, audio_wall), settled_wall_s=wall,
               thread_cpu=cpu, **probe.take(),
               frames_per_step=(engine.step.frames_total - frames) / max(1, engine.step.steps - steps))
    if leads:
        busy, device, aligned = (service.stats[k] - before[k] for k in ("busy_seconds", "device_seconds",
                                                                        "audio_seconds"))
        generated = sum(r.audio_s for r in records)
        opening = [lead for lead, end in leads if end < 1.0] or [np.nan]   # words a player reaches in its first s
        leads = [lead for lead, _ in leads]
        row.update(lead_p50_s=float(np.percentile(leads, 50)), lead_p1_s=float(np.percentile(leads, 1)),
                   lead_min_s=float(min(leads)), opening_lead_p50_s=float(np.percentile(opening, 50)),
                   opening_lead_p1_s=float(np.percentile(opening, 1)), settled_early=float(np.mean(early)),
                   words=len(leads),
                   aligner_busy=busy / wall, aligned_ratio=aligned / generated,
                   aligner_ms_per_audio_s=busy * 1000 / generated,
                   aligner_device_ms_per_aligned_s=device * 1000 / max(aligned, 1e-9),
                   **{f"turns_{k}": v - before[f"turns_{k}"] for k, v in engine.side_work.stats.items()},
                   **{f"{k}_per_forward": (service.stats[k] - before[k]) / max(1, service.stats["batches"] -
                                                                              before["batches"])
                      for k in ("jobs", "turns")})
        delta = {k: service.stats[k] - before[k] for k in ("jobs", "turns", "queued_seconds", "turn_wait_seconds")}
        row.update(job_queued_ms=delta["queued_seconds"] * 1000 / max(1, delta["jobs"]),
                   turn_wait_ms=delta["turn_wait_seconds"] * 1000 / max(1, delta["turns"]),
                   **({f"job_latency_p{q}_ms": float(np.percentile(latencies, q)) * 1000 for q in (50, 90)}
                      if latencies else {}))
    return row


def line(c: int, row: dict) -> str:
    """One level's row, printed."""
    r = row
    out = (f"c={c:4d} align {'on ' if r['align'] else 'off'} | cpu {r['thread_cpu']} | interpreter wait p50 "
           f"{r['interpreter_wait_p50_ms']:.2f} ms p90 {r['interpreter_wait_p90_ms']:.2f} ms | viable "
           f"{r['viability']:.3f} (as sent {r['viability_engine']:.3f}, first stalls {r['first_stall_p10_p50_p90_s']})"
           f" | rtf p50 {r['rtf_p50']:.3f} p90 {r['rtf_p90']:.3f} | ttfa p50 {r['ttfa_p50_ms']:6.1f} ms | "
           f"{r['audio_s_per_s']:7.1f} audio-s/s")
    if not r["align"]:
        return out
    return out + (
        f" | lead p50 {r['lead_p50_s']:6.2f} s p1 {r['lead_p1_s']:6.2f} s min {r['lead_min_s']:6.2f} s (words ending"
        f" in the first second: p50 {r['opening_lead_p50_s']:.2f} s p1 {r['opening_lead_p1_s']:.2f} s) | by margin "
        f"{r['settled_early']:.2f} | aligner busy {r['aligner_busy']:.1%}, {r['aligner_ms_per_audio_s']:.3f} ms per "
        f"audio-s ({r['aligner_device_ms_per_aligned_s']:.3f} on the device per aligned s), turns "
        f"{r['turns_given']}/{r['turns_idle']}/{r['turns_late']}/{r['turns_withdrawn']} (given/idle/late/withdrawn), "
        f"engine waited "
        f"{r['turns_engine_wait_s']:.2f} s, aligned {r['aligned_ratio']:.2f}x the audio, {r['jobs_per_forward']:.1f} "
        f"jobs and {r['turns_per_forward']:.1f} turns per forward, {r['frames_per_step']:.0f} frames per step | "
        f"a job: queued {r['job_queued_ms']:.0f} ms, a turn awaited {r['turn_wait_ms']:.0f} ms, submitted to answered "
        f"p50 {r.get('job_latency_p50_ms', np.nan):.0f} ms p90 {r.get('job_latency_p90_ms', np.nan):.0f} ms")


def levels(args, engine, aligner: Aligner, times: str) -> list[dict]:
    """Each level's streams with alignment off, then on."""
    rows, profiler = [], (profile_forwards(aligner) if args.host_profile else None)
    service = AlignmentService(aligner, args.max_batch, args.max_batch_seconds,
                               side_work=None if args.concurrent else engine.side_work).start()
    probe = InterpreterProbe()
    asyncio.run(level(engine, service, 2, workload(2, seed=99, max_chars=60), times, probe))     # warm-up
    if profiler is not None:
        profiler.clear()
        profiler.events = []
    for c in args.concurrency:
        items = workload(max(1, int(c * args.rounds)), seed=c, max_chars=args.max_chars)
        for svc in (None, service):
            row = asyncio.run(level(engine, svc, c, items, times, probe))
            rows.append(row)
            print(line(c, row), flush=True)
            if profiler is not None and svc is not None:
                report(profiler)
    service.close()
    return rows


def drop(aligner: Aligner | None) -> None:
    """Its graphs' memory back before the next one captures: the model holds its graphs, which hold its bound methods
    (a cycle that only the collector frees)."""
    del aligner
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def main():
    p = argparse.ArgumentParser()
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="Qwen3-ForcedAligner-0.6B checkpoint")
    src.add_argument("--dummy", nargs="?", const="published", choices=("published", "tiny"))
    p.add_argument("--tts-dummy", default="1.7B-CustomVoice")
    p.add_argument("--tts-model")
    p.add_argument("--concurrency", type=int, nargs="*", default=[1, 64], help="none: the cost and kernels only")
    p.add_argument("--rounds", type=float, default=1.0, help="streams per level = rounds * concurrency")
    p.add_argument("--max-chars", type=int, default=300)
    p.add_argument("--kv-tokens-per-stream", type=int, default=384, help="talker KV tokens reserved per stream")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 64])
    p.add_argument("--windows", type=float, nargs="+", default=[2.0, 4.0, 8.0])
    p.add_argument("--max-batch", type=int, default=128, help="alignment jobs per forward")
    p.add_argument("--max-batch-seconds", type=float, default=384.0, help="audio per forward")
    p.add_argument("--times", choices=("stand-in", "model"), help="default: model with --model, else stand-in")
    p.add_argument("--eager", action="store_true", help="the aligner without CUDA graphs")
    p.add_argument("--concurrent", action="store_true",
                   help="forwards beside the engine's steps at a lower priority, not in turns between them")
    p.add_argument("--kernels", type=int, nargs="*", default=[], help="batches of 4 s windows whose kernels to list")
    p.add_argument("--front-end", nargs="+", choices=FRONT_ENDS, default=[DEFAULT],
                   help="the audio encoder's conv front ends to measure, each loaded in turn")
    p.add_argument("--host-profile", action="store_true", help="cProfile the aligner's forwards per level")
    p.add_argument("--device")
    p.add_argument("--json")
    args = p.parse_args()
    times = args.times or ("model" if args.model else "stand-in")
    device = torch.cuda.get_device_name() if torch.cuda.is_available() and args.device != "cpu" else "cpu"
    engine = Engine.load(model=args.tts_model, dummy=None if args.tts_model else args.tts_dummy,
                         device=args.device, max_active=max(args.concurrency, default=1),
                         kv_tokens_per_stream=args.kv_tokens_per_stream).start()
    aligner, by_front_end, first = None, {}, None
    for front_end in args.front_end:
        aligner = drop(aligner)
        aligner, by_front_end[front_end] = measure(args, front_end, first)
        first = first or by_front_end[front_end]["timestamps"]
    if args.concurrency and len(args.front_end) > 1:
        aligner = drop(aligner)
        aligner = Aligner.load(model=args.model, dummy=args.dummy, device=args.device,
                               graphs=False if args.eager else None, front_end=args.front_end[0])
    results = dict(device=device, aligner=aligner.name, **by_front_end[args.front_end[0]],
                   front_end=args.front_end[0], levels=[])
    if len(args.front_end) > 1:
        results["by_front_end"] = by_front_end
    if args.concurrency:
        results["levels"] = levels(args, engine, aligner, times)
    engine.shutdown()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
