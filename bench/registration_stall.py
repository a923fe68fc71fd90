"""Diagnostic (in-process, not a headline): why a voice registration widens a live stream's largest gap (issue 33).
A victim stream alone, then beside back-to-back registrations of the longest ICL reference; per registration the
device time of each stage, per run the engine's longest steps, the allocator's device mallocs/frees and a profile.

python3 bench/registration_stall.py --dummy 1.7B-Base --out DIR"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

sys.path[:0] = [str(Path(__file__).resolve().parent.parent)]

from engine.api.engine import Engine  # noqa: E402
from engine.api.request import SamplingParams, SynthesisRequest, VoiceRef  # noqa: E402
from engine.api.voice_input import MAX_REFERENCE_S, MAX_TRANSCRIPT_CHARS  # noqa: E402

TEXT = "The victim keeps on speaking, minding its own business, while other clients register voices. " * 4


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.current_stream().synchronize()


def memory() -> dict:
    return torch.cuda.memory_stats() if torch.cuda.is_available() else dict.fromkeys(
        ("num_device_alloc", "num_device_free", "num_alloc_retries"), 0)


def timed(fn, name: str, times: dict):
    def run(*args, **kwargs):
        sync()
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        sync()
        times.setdefault(name, []).append(round(time.perf_counter() - t0, 4))
        return out
    return run


def victim(engine: Engine) -> float:
    handle = engine.submit(SynthesisRequest(TEXT, voice="victim", max_frames=150, ignore_eos=True, sampling=SamplingParams.greedy()))
    arrivals = [time.perf_counter() for _ in handle.iter_blocking()]
    return max(b - a for a, b in zip(arrivals, arrivals[1:]))


def beside(engine: Engine, ref: VoiceRef, rounds: int) -> tuple[list[float], int]:
    stop, count = threading.Event(), [0]

    def register():
        while not stop.is_set():
            engine.register_voice(f"v{count[0] % 4}", ref).result()
            count[0] += 1
    thread = threading.Thread(target=register, daemon=True)
    thread.start()
    time.sleep(0.5)
    gaps = [victim(engine) for _ in range(rounds)]
    stop.set()
    thread.join()
    return gaps, count[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dummy", default="1.7B-Base")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=MAX_REFERENCE_S, help="the longest reference")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    engine = Engine.load(dummy=args.dummy, max_active=64).start()
    model, stages = engine.model, {}
    enc = model.tts.speaker_encoder
    enc.embed = timed(enc.embed, "speaker_embed", stages)
    model.codec.encoder.encode = timed(model.codec.encoder.encode, "codec_encode", stages)
    steps: list[float] = []
    run = engine.step.run

    def step_run(*a, **k):
        t0 = time.perf_counter()
        try:
            return run(*a, **k)
        finally:
            steps.append(time.perf_counter() - t0)
    engine.step.run = step_run
    rate = 24000
    audio = np.random.default_rng(0).standard_normal(rate * args.seconds).astype(np.float32) * 0.1
    refs = {"icl_long": VoiceRef(audio, rate, "a" * MAX_TRANSCRIPT_CHARS),
            "xvec_long": VoiceRef(audio, rate, None, x_vector_only=True),
            "icl_short": VoiceRef(audio[:rate * args.seconds // 6], rate, "a" * 100)}
    engine.register_voice("victim", refs["icl_short"]).result()
    victim(engine)
    report = dict(device=torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu", alone=[victim(engine) for _ in range(args.rounds)], runs={})
    refs["icl_long_no_cudnn_benchmark"] = refs["icl_long"]
    for name, ref in refs.items():
        torch.backends.cudnn.benchmark = "no_cudnn_benchmark" not in name
        spy = shutil.which("py-spy") and name == "icl_long" and subprocess.Popen(
            ["py-spy", "record", "-p", str(os.getpid()), "-d", "6", "-r", "200", "--threads", "--gil", "--format",
             "raw", "-o", str(args.out / "pyspy-gil.txt")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stages.clear()
        steps.clear()
        before = memory()
        gaps, n = beside(engine, ref, args.rounds)
        after = memory()
        report["runs"][name] = dict(
            gaps=gaps, registrations=n, stages=dict(stages), longest_steps=sorted(steps)[-8:],
            device_mallocs=after["num_device_alloc"] - before["num_device_alloc"],
            device_frees=after["num_device_free"] - before["num_device_free"],
            alloc_retries=after["num_alloc_retries"] - before["num_alloc_retries"])
        print(name, json.dumps(report["runs"][name]), flush=True)
        if spy:
            spy.wait()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        gaps, _ = beside(engine, refs["icl_long"], 1)
    report["profiled_gap"] = gaps
    report["profile"] = prof.key_averages().table(sort_by="cuda_time_total", row_limit=40)
    report["profile_cpu"] = prof.key_averages().table(sort_by="cpu_time_total", row_limit=25)
    (args.out / "registration_stall.json").write_text(json.dumps(report, indent=1))
    print(report["profile"])
    print("alone", report["alone"])
    engine.shutdown()


if __name__ == "__main__":
    main()
