"""Drive the engine directly at fixed concurrency levels; print a table and write JSON.

python bench/engine_bench.py --dummy 1.7B-CustomVoice --concurrency 1 16 64 256 --json out.json"""
import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.metrics import StreamRecord, summarize  # noqa: E402
from bench.workload import workload  # noqa: E402
from engine import Engine, SamplingParams, SynthesisRequest  # noqa: E402
from engine.kernels.registry import KernelSettings  # noqa: E402


async def one_stream(engine, text: str, frames: int, chunk_frames, records: list) -> None:
    rec = StreamRecord(time.perf_counter(), chars=len(text))
    handle = engine.submit(SynthesisRequest(text=text, max_frames=frames, ignore_eos=True,
                                            sampling=SamplingParams(seed=len(records)), chunk_frames=chunk_frames))
    async for chunk in handle:
        rec.arrivals.append(time.perf_counter())
        rec.samples.append(len(chunk.pcm))
        rec.sent.append(chunk.sent_at)
    records.append(rec)


async def run_level(engine, concurrency: int, items, chunk_frames) -> tuple[list[StreamRecord], float]:
    """Fixed concurrency: `concurrency` workers, each starting its next stream when one ends."""
    pending, records = list(items), []

    async def worker():
        while pending:
            await one_stream(engine, *pending.pop(), chunk_frames, records)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return records, time.perf_counter() - t0


async def run_poisson(engine, rate: float, items, chunk_frames, seed: int = 0) -> tuple[list[StreamRecord], float]:
    """Poisson arrivals at `rate` streams per second."""
    rng, records, tasks = random.Random(seed), [], []
    t0 = time.perf_counter()
    for text, frames in items:
        tasks.append(asyncio.create_task(one_stream(engine, text, frames, chunk_frames, records)))
        await asyncio.sleep(rng.expovariate(rate))
    await asyncio.gather(*tasks)
    return records, time.perf_counter() - t0


class HostProfile:
    """cProfile around each engine step (on the engine thread): where the host spends a step, waits included."""

    def __init__(self, step):
        import cProfile
        self.step, self.prof, self.steps = step, cProfile.Profile(), 0
        run = type(step).run.__get__(step)

        def profiled():
            self.steps += 1
            self.prof.runcall(run)
        step.run = profiled

    def report(self, top: int = 14) -> None:
        import pstats
        del self.step.run                          # back to the class's run
        stats = pstats.Stats(self.prof).stats
        rows = sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]
        print(f"  host profile, ms per step over {self.steps} steps (tottime / cumtime):")
        for (file, line, name), (_, _, tt, ct, _) in rows:
            print(f"    {1000 * tt / self.steps:7.2f} {1000 * ct / self.steps:7.2f}  {Path(file).name}:{line} {name}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dummy", default="1.7B-CustomVoice")
    p.add_argument("--model")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64, 256])
    p.add_argument("--rounds", type=float, default=1.0, help="streams per level = rounds * concurrency")
    p.add_argument("--poisson", type=float, nargs="+", default=[],
                   help="also run Poisson arrivals at these rates (streams/s), --poisson-streams streams each")
    p.add_argument("--poisson-streams", type=int, default=200)
    p.add_argument("--max-chars", type=int, default=500)
    p.add_argument("--chunk-frames", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    p.add_argument("--max-active", type=int, default=0)
    p.add_argument("--kv-tokens-per-stream", type=int, default=1024, help="talker KV tokens reserved per stream")
    p.add_argument("--host-profile", action="store_true", help="cProfile the engine thread's steps per level")
    p.add_argument("--serial-decode", action="store_true", help="the codec decode after the talker, not beside it")
    p.add_argument("--official", type=int, nargs="+", metavar="BATCH",
                   help="then the official qwen-tts on the same weights at these batch sizes, and the ratios "
                        "(its wheels: bash bench/gpu_wheels.sh)")
    p.add_argument("--official-frames", type=int, default=100)
    p.add_argument("--json")
    args = p.parse_args()
    import torch
    max_active = args.max_active or max(args.concurrency)
    t0 = time.perf_counter()
    engine = Engine.load(model=args.model, dummy=None if args.model else args.dummy, max_active=max_active,
                         kv_tokens_per_stream=args.kv_tokens_per_stream,
                         kernels=KernelSettings(side_decode=not args.serial_decode)).start()
    print(f"loaded {engine.info['model']} in {time.perf_counter() - t0:.1f}s", flush=True)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    asyncio.run(run_level(engine, 2, workload(4, seed=99, max_chars=60), tuple(args.chunk_frames)))   # warm-up
    results = []
    levels = [("concurrency", c) for c in args.concurrency] + [("rate", r) for r in args.poisson]
    for kind, c in levels:
        items = workload(max(1, int(c * args.rounds)) if kind == "concurrency" else args.poisson_streams,
                         seed=int(c), max_chars=args.max_chars)
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        steps = engine.step.steps
        host = HostProfile(engine.step) if args.host_profile else None
        run = run_level(engine, c, items, tuple(args.chunk_frames)) if kind == "concurrency" else \
            run_poisson(engine, c, items, tuple(args.chunk_frames))
        records, wall = asyncio.run(run)
        row = dict(device=device, model=engine.info["model"], **{kind: c}, **summarize(records, wall),
                   ms_per_step=round(wall * 1000 / max(engine.step.steps - steps, 1), 2),
                   gpu_ms={k: round(v, 3) for k, v in engine.runner.timeline.ms.items()})
        if torch.cuda.is_available():
            row["gpu_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
        results.append(row)
        print(f"{kind[0]}={c:5g} ttfa p50 {row['ttfa_p50_ms']:7.1f} ms p90 {row['ttfa_p90_ms']:7.1f} | rtf p50 "
              f"{row['rtf_p50']:.3f} p90 {row['rtf_p90']:.3f} | viable {row['viability']:.3f} | "
              f"{row['audio_s_per_s']:7.1f} audio-s/s | {row.get('gpu_mem_gib', 0):.1f} GiB | "
              f"{row['ms_per_step']} ms/step | GPU ms (moving averages) {row['gpu_ms']}",
              flush=True)
        if host:
            host.report()
        if args.json:                               # after every level: a run cut short keeps what it measured
            Path(args.json).write_text(json.dumps(results, indent=1))
    engine.shutdown()
    if args.official and not args.model:
        del engine
        results += against_official(args.dummy, args.official, args.official_frames, results)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))


def against_official(variant: str, batches: list[int], frames: int, ours: list[dict]) -> list[dict]:
    """The official implementation on the very weights of `--dummy VARIANT`, in this run, and our ratios to it."""
    import gc

    import torch

    from bench.official_bench import build_official, measure
    from engine.models.weights import default_device_dtype
    gc.collect()
    torch.cuda.empty_cache()
    tts = build_official(variant, *default_device_dtype(None, None), seed=0, attn="sdpa")
    rows = measure(tts, batches, frames, max_chars=125, streaming_text=True)
    one = [r for r in ours if r.get("concurrency") == 1]
    single = [r for r in rows if r["batch"] == 1]
    ratios = dict(ratios="ours vs official qwen-tts, same weights and GPU",
                  throughput=max(r["audio_s_per_s"] for r in ours) / max(r["audio_s_per_s"] for r in rows))
    if one and single:
        ratios.update(rtf_one_stream=single[0]["rtf"] / one[-1]["rtf_p50"],
                      first_audio=single[0]["first_audio_ms"] / one[-1]["ttfa_p50_ms"])
    print("  ".join(f"{k}: {v:.1f}x" if isinstance(v, float) else v for k, v in ratios.items()), flush=True)
    return rows + [ratios]


if __name__ == "__main__":
    main()
