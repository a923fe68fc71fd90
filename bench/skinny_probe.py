"""Tile choices for the few-row products (engine/kernels/few_row_layer.py) at the 1.7B's shapes, against cuBLAS: microseconds per
product at one row, each product on its own copy of the weights (as layers are: nothing stays in L2), timed as a
CUDA graph of back-to-back launches. `--sweep`: the best tile choices per shape, for few_row_layer._config."""
import argparse
import itertools
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.kernels import few_row_layer  # noqa: E402

SHAPES = {  # name: (N, K, kind)
    "predictor qkv": (4096, 1024, "norm"), "predictor o": (1024, 2048, "res"),
    "predictor gate_up": (3072, 1024, "gated"), "predictor down": (1024, 3072, "res"),
    "talker qkv": (4096, 2048, "norm"), "talker o": (2048, 2048, "res"),
    "talker gate_up": (6144, 2048, "gated"), "talker down": (2048, 6144, "res")}
COPIES = 8


def graph_us(calls) -> float:
    for c in calls:
        c()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    g.replay()
    start.record()
    for _ in range(20):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000 / (20 * len(calls))


def sweep(n, k, kind, ws, x, args) -> str:
    results = []
    dt = x.dtype
    for cfg in itertools.product((16, 32), (256, 512), (3, 4), (4, 8)):
        few_row_layer.CONFIG[(n, k, kind == "gated", dt)] = cfg
        try:
            results.append((graph_us([lambda w=w: few_row_layer._linear(x, w, **args) for w in ws]), cfg))
        except Exception as e:         # shared memory over the limit
            print(f"  {cfg}: {type(e).__name__}")
    few_row_layer.CONFIG.pop((n, k, kind == "gated", dt))
    results.sort()
    return f"best {[(c, round(t, 1)) for t, c in results[:4]]}"


@torch.inference_mode()
def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sweep", action="store_true")
    sweeping = p.parse_args().sweep
    dt = torch.bfloat16
    for name, (n, k, kind) in SHAPES.items():
        rows = 2 * n if kind == "gated" else n
        ws = [torch.randn(rows, k, device="cuda", dtype=dt) * 0.02 for _ in range(COPIES)]
        x, res, norm = (torch.randn(1, k, device="cuda", dtype=dt), torch.randn(1, n, device="cuda", dtype=dt),
                        torch.ones(k, device="cuda", dtype=dt))
        args = dict(norm=dict(norm_w=norm, eps=1e-6), res=dict(res=res),
                    gated=dict(norm_w=norm, gated=True, eps=1e-6))[kind]
        mb = rows * k * 2 / 1e6
        cublas = graph_us([lambda w=w: F.linear(x, w) for w in ws])
        line = f"{name:18s} {mb:6.1f} MB  cuBLAS {cublas:5.1f} us ({mb / cublas:4.2f} TB/s)"
        t = graph_us([lambda w=w: few_row_layer._linear(x, w, **args) for w in ws])
        line += f"  Triton {t:5.1f} us ({mb / t:4.2f} TB/s)"
        print(line + ("  " + sweep(n, k, kind, ws, x, args) if sweeping else ""), flush=True)


if __name__ == "__main__":
    main()
