"""The code predictor's one-kernel frame (engine/frame_kernel.py) against its pass-by-pass path: the same codes
(float32: identical, else counted), and the GPU time of a frame under CUDA graphs for a few grid settings.

python3 bench/frame_bench.py --dummy 1.7B-CustomVoice --batches 1 2 4 8 --configs 0:1 0:0 66:1"""
import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import frame_kernel  # noqa: E402
from engine.model import load_model  # noqa: E402
from engine.sampling import SamplingBatch  # noqa: E402


def inputs(model, b: int, seed: int):
    g = torch.Generator("cuda").manual_seed(seed)
    talker = model.tts.talker
    hidden = torch.randn(b, model.cfg.talker.hidden_size, generator=g, device="cuda").to(model.dtype)
    c0 = torch.randint(0, 2048, (b,), generator=g, device="cuda")
    kinds = [(False, 0.9, 50, 1.0), (True, 0.9, 50, 1.0), (False, 1.0, 30, 0.8)]   # defaults, greedy, a top-p cut
    rows = [(*kinds[i % 3], 1000 + i, 5 + i) for i in range(b)]
    return hidden, talker.embed_codec(c0), SamplingBatch.build(rows, "cuda")


def frame_ms(predictor, args, reps: int = 50) -> float:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        predictor(*args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        predictor(*args)
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


@torch.inference_mode()
def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dummy", default="1.7B-CustomVoice")
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    p.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--configs", nargs="+", default=["0:1"], help="PROGRAMS:PREFETCH pairs to time (0: one per SM)")
    args = p.parse_args()
    for dtype in args.dtypes:
        model = load_model(dummy=args.dummy, device="cuda", dtype=getattr(torch, dtype))
        predictor = model.tts.talker.code_predictor
        fk = predictor.frame_kernel
        same = total = 0
        for b in args.batches:
            for seed in range(3):
                x = inputs(model, b, seed)
                frame_kernel.USE_KERNEL = True
                got = predictor(*x)
                frame_kernel.USE_KERNEL = False
                want = predictor(*x)
                frame_kernel.USE_KERNEL = True
                same += int(torch.equal(got, want))
                total += 1
                if dtype == "float32" and not torch.equal(got, want):
                    print("differs", b, seed, (got != want).nonzero()[:4].tolist())
        flag = int(fk.sync[2])
        print(f"{args.dummy} {dtype}: kernel codes == pass-by-pass codes in {same}/{total} frames; barrier flag {flag}",
              flush=True)
        assert flag == 0 and (dtype != "float32" or same == total)
        if dtype != "bfloat16":
            continue
        print(f"{torch.cuda.get_device_name()}: GPU ms per frame (graph replay)")
        for b in args.batches:
            x = inputs(model, b, 0)
            frame_kernel.USE_KERNEL = False
            row = [f"passes {frame_ms(predictor, x):.3f}"]
            frame_kernel.USE_KERNEL = True
            for config in args.configs:
                programs, prefetch = (int(v) for v in config.split(":"))
                frame_kernel.PROGRAMS, frame_kernel.PREFETCH = programs, bool(prefetch)
                row.append(f"kernel {config} {frame_ms(predictor, x):.3f}")
            print(f"batch {b}: " + " | ".join(row), flush=True)
        frame_kernel.PROGRAMS, frame_kernel.PREFETCH = 0, True
        assert int(fk.sync[2]) == 0


if __name__ == "__main__":
    main()
