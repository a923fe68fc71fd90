"""The decoder layers' projections at many rows, bf16 against --weights-dtype fp8 (a GPU diagnostic): per projection
of the 1.7B talker and code predictor, the bf16 GEMM, the fp8 GEMM alone (activations already quantized) and
fp8_linear.linear whole (quantizing the rows first, eagerly: compiled, that pass fuses into the op before); then a
step's sum (talker 28 layers, predictor 5 layers x 15 passes) and each product's relative error.

python3 bench/fp8_gemm_probe.py [--rows 1024 2048] [--reps 50]"""
import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stage_bench import gpu_ms  # noqa: E402
from engine.kernels import fp8_linear  # noqa: E402

# (stage, projection, in, out, times a step): 1.7B-CustomVoice's configs
SHAPES = [("talker", "qkv", 2048, 4096, 28), ("talker", "o", 2048, 2048, 28), ("talker", "gate_up", 2048, 12288, 28),
          ("talker", "down", 6144, 2048, 28), ("predictor", "qkv", 1024, 4096, 75), ("predictor", "o", 2048, 1024, 75),
          ("predictor", "gate_up", 1024, 6144, 75), ("predictor", "down", 3072, 1024, 75)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, nargs="+", default=[1024, 2048])
    p.add_argument("--reps", type=int, default=50)
    args = p.parse_args()
    torch.manual_seed(0)
    print(f"{torch.cuda.get_device_name()}: ms per product (bf16 | fp8 GEMM alone | fp8 linear whole), error")
    for m in args.rows:
        step = {}
        for stage, name, k, n, times in SHAPES:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            w = (0.03 * torch.randn(n, k, device="cuda")).to(torch.bfloat16)
            pair = fp8_linear.quantize(w)
            x8, scale = fp8_linear.rows(x)
            full = F.linear(x, w)
            err = ((fp8_linear.linear(x, pair).float() - full.float()).norm() / full.float().norm()).item()
            t = (gpu_ms(lambda: F.linear(x, w), args.reps),
                 gpu_ms(lambda: torch._scaled_mm(x8, pair[0].t(), scale_a=scale, scale_b=pair[1],
                                             out_dtype=torch.bfloat16), args.reps),
                 gpu_ms(lambda: fp8_linear.linear(x, pair), args.reps))
            step[stage] = [a + times * b for a, b in zip(step.get(stage, [0, 0, 0]), t)]
            print(f"{m:5d} {stage:9s} {name:7s} {k:5d}x{n:<5d} {t[0]:7.3f} | {t[1]:7.3f} | {t[2]:7.3f}  {err:.1e}",
                  flush=True)
        for stage, t in step.items():
            print(f"{m:5d} {stage} a step: {t[0]:.2f} ms bf16, {t[1]:.2f} ms fp8 GEMMs, {t[2]:.2f} ms fp8 eager whole")


if __name__ == "__main__":
    main()
