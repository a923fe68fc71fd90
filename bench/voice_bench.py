"""CPU diagnostic: time to first chunk for N simultaneous requests of a registered ICL clone voice (tiny 1.7B-Base)
against N of a built-in speaker (tiny CustomVoice). Prints both; asserts nothing.

python bench/voice_bench.py --streams 1 8 32 --reference-s 5"""
import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workload import make_text  # noqa: E402
from engine import Engine, SamplingParams, SynthesisRequest, VoiceRef  # noqa: E402

SR = 24000
REF_TEXT = "This is a short reference clip, spoken slowly and clearly so that the voice can be cloned well."


def reference_audio(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    noise = np.random.default_rng(0).standard_normal(t.shape)
    return (0.3 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 1.3 * t) + 0.05 * noise).astype(np.float32)


def first_chunks_ms(engine: Engine, voice: str, n: int, frames: int, seed: int) -> list[float]:
    """Submit n requests at once; each one's submit -> first chunk sent, in ms."""
    rng = random.Random(seed)
    requests = [SynthesisRequest(text=make_text(rng.randint(40, 200), rng), voice=voice, language="english",
                                 max_frames=frames, ignore_eos=True, sampling=SamplingParams(seed=i))
                for i in range(n)]
    starts, handles = [], []
    for r in requests:
        starts.append(time.perf_counter())
        handles.append(engine.submit(r))
    firsts = [[c.sent_at for c in h.iter_blocking()][0] for h in handles]
    return [(first - t0) * 1000 for first, t0 in zip(firsts, starts)]


def level(engine: Engine, voice: str, n: int, frames: int) -> str:
    ms = np.array(first_chunks_ms(engine, voice, n, frames, seed=n))
    return f"p50 {np.percentile(ms, 50):7.1f}  p90 {np.percentile(ms, 90):7.1f}  max {ms.max():7.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--reference-s", type=float, default=5.0)
    ap.add_argument("--frames", type=int, default=8)
    args = ap.parse_args()
    clone = Engine.load(dummy="tiny-1.7B-Base", device="cpu", max_active=max(args.streams)).start()
    clone.register_voice("clone", VoiceRef(reference_audio(args.reference_s), SR, REF_TEXT)).result()
    speaker = Engine.load(dummy="tiny", device="cpu", max_active=max(args.streams)).start()
    print(f"reference {args.reference_s:.0f} s ({clone.voices.get('clone').ref_codes.shape[0]} frames); "
          f"{args.frames} frames per request; {torch.get_num_threads()} CPU threads")
    for engine, voice in ((clone, "clone"), (speaker, "vivian")):
        first_chunks_ms(engine, voice, 2, args.frames, seed=0)          # warm-up
    for n in args.streams:
        print(f"N={n:4d}  clone voice    {level(clone, 'clone', n, args.frames)}")
        print(f"N={n:4d}  built-in voice {level(speaker, 'vivian', n, args.frames)}")
    clone.shutdown()
    speaker.shutdown()


if __name__ == "__main__":
    main()
