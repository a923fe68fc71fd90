"""The talker's decode attention over the paged KV cache, alone (a GPU diagnostic): our Triton kernel against
FlashAttention 4 (`flash-attn-4`, CuTe DSL, its page table over our blocks) where it is installed, at the talker's
shape (16 query heads, 8 KV heads, head dim 128, bf16, blocks of 64), one query a stream, each stream's context
`--context` tokens in blocks scattered over the cache; ours at each Triton launch (warps, pipeline stages). Each call
is captured in a CUDA graph and replayed, as the engine runs it; prints ms, the KV bytes a second it reads and its
error against the torch reference.

python3 bench/attention_bench.py [--batches 512 1024 2048] [--context 160] [--json out.json]
FA4's wheels: `bash bench/gpu_wheels.sh fa4` (two carries)."""
import argparse
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.kernels import paged_attention as kernel  # noqa: E402
from engine.kernels.paged_attention import paged_attention, paged_attention_reference  # noqa: E402

HEADS, KV_HEADS, DIM, BLOCK = 16, 8, 128, 64


def case(batch: int, context: int, seed: int = 0) -> dict:
    g = torch.Generator("cuda").manual_seed(seed)
    per = math.ceil(context / BLOCK)
    blocks = batch * per + 1
    k, v = (torch.randn(blocks * BLOCK, KV_HEADS, DIM, device="cuda", dtype=torch.bfloat16, generator=g)
            for _ in range(2))
    tables = torch.randperm(blocks - 1, device="cuda", generator=g)[:batch * per].view(batch, per)
    return dict(q=torch.randn(batch, HEADS, DIM, device="cuda", dtype=torch.bfloat16, generator=g), k=k, v=v,
                tables=tables, lens=torch.full((batch,), context, device="cuda", dtype=torch.int64),
                scale=DIM ** -0.5)


def ours(c: dict, launch: dict):
    def call():
        kernel.LAUNCH = launch                  # the launch captured in the graph is this one's
        return paged_attention(c["q"], c["k"], c["v"], c["tables"], c["lens"], c["scale"], BLOCK)
    return call


def fa4(c: dict, pack_gqa: bool, splits: int):
    from flash_attn.cute import flash_attn_varlen_func
    b = c["q"].shape[0]
    q, tables, lens = c["q"].view(b, 1, HEADS, DIM), c["tables"].to(torch.int32), c["lens"].to(torch.int32)
    k, v = (x.view(-1, BLOCK, KV_HEADS, DIM) for x in (c["k"], c["v"]))

    def call():
        out = flash_attn_varlen_func(q, k, v, seqused_k=lens, page_table=tables, softmax_scale=c["scale"],
                                     max_seqlen_k=tables.shape[1] * BLOCK, pack_gqa=pack_gqa, num_splits=splits)
        return (out[0] if isinstance(out, tuple) else out).view(b, HEADS, DIM)
    return call


def timed(fn, replays: int = 50) -> tuple[float, torch.Tensor]:
    """ms a replay of `fn` captured in a graph, and its output."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()                                  # compiles, autotunes
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / replays, out


@torch.inference_mode()
def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batches", type=int, nargs="+", default=[512, 1024, 2048])
    p.add_argument("--context", type=int, default=160)
    p.add_argument("--json")
    args = p.parse_args()
    try:
        import flash_attn.cute  # noqa: F401
        variants = {f"fa4(pack_gqa={pg}, splits={s})": (lambda c, pg=pg, s=s: fa4(c, pg, s))
                    for pg in (True, False) for s in (1, 2)}
    except ImportError as exc:
        print(f"flash-attn-4 not installed ({exc}): ours alone")
        variants = {}
    default = dict(kernel.LAUNCH)
    launches = [dict(num_warps=w, num_stages=st) for w in (2, 4, 8) for st in (1, 2, 3, 4)]
    variants = {f"ours(warps={x['num_warps']}, stages={x['num_stages']})" + (" (the default)" if x == default else ""):
                (lambda c, x=x: ours(c, x)) for x in launches} | variants
    rows = []
    for batch in args.batches:
        c = case(batch, args.context)
        want = paged_attention_reference(c["q"], c["k"], c["v"], c["tables"], c["lens"], c["scale"], BLOCK).float()
        kv_bytes = 2 * batch * args.context * KV_HEADS * DIM * 2
        for name, make in variants.items():
            try:
                ms, out = timed(make(c))
            except Exception as exc:                   # a variant FA4 does not support here: say so, go on
                print(f"{batch:5d} streams  {name:34s} failed: {type(exc).__name__}: {exc}"[:300], flush=True)
                continue
            err = ((out.float() - want).norm() / want.norm()).item()
            rows.append(dict(batch=batch, context=args.context, kernel=name, ms=ms, tb_s=kv_bytes / ms / 1e9,
                             error=err))
            print(f"{batch:5d} streams  {name:34s} {ms:8.3f} ms  {kv_bytes / ms / 1e9:5.2f} TB/s  error {err:.1e}",
                  flush=True)
    kernel.LAUNCH = default
    if args.json:
        Path(args.json).write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), rows=rows), indent=1))


if __name__ == "__main__":
    main()
