"""GPU time of each per-frame stage by batch size (graph replays timed with CUDA events), and what one engine
step costs on the host: the gap between the two is launch and Python overhead."""
import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import Engine, SamplingParams  # noqa: E402
from engine.kernels.registry import KernelSettings  # noqa: E402


def gpu_ms(fn, reps: int = 20) -> float:
    fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def stage_calls(r, b: int, context: int) -> dict:
    """Zero-argument calls of each stage at batch b, with a plausible talker KV layout of `context` tokens and the
    checkpoint's default sampling in every slot."""
    dev = r.device
    slots = torch.arange(b, device=dev)
    params = r.model.sampling.params
    for key, value in zip(params, r.model.sampling.row(SamplingParams().with_defaults(r.model.cfg.generation), 0)):
        params[key][:b] = value
    blocks_per = -(-context // r.kv.block_size)
    r.kv.tables[:b, :blocks_per] = torch.arange(b * blocks_per, device=dev).view(b, blocks_per)
    positions = torch.full((b,), context - 1, device=dev)
    zeros = torch.zeros(b, dtype=torch.int64, device=dev)
    codes = torch.randint(0, 2048, (b, 16), device=dev)
    return dict(predict=lambda: r.predict_stage(False, slots),
                talk=lambda: r.talk_stage(False, slots, zeros, positions, zeros.bool()),
                decode=lambda: r.decode_stage(None, slots, codes))


def eager_calls(r, b: int, context: int) -> dict:
    """The same stages run without their graphs (the compiled ops still on): what the profiler can see."""
    graphed = stage_calls(r, b, context)
    stages = (r.predict_stage, r.talk_stage, r.decode_stage)

    def eager(name):
        def call():
            kept = [st.use_graphs for st in stages]
            for st in stages:
                st.use_graphs = False
            try:
                graphed[name]()
            finally:
                for st, k in zip(stages, kept):
                    st.use_graphs = k
        return call
    return {name: eager(name) for name in graphed}


def kernel_table(name: str, fn, top: int = 12) -> None:
    """Kernels one call of a stage launches: count, their summed GPU time, and the costliest by name."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    rows = [e for e in prof.key_averages() if e.device_type.name == "CUDA" and e.count]
    kernels = sum(e.count for e in rows)
    total_ms = sum(e.self_device_time_total for e in rows) / 1000
    print(f"{name}: {kernels} kernels, {total_ms:.2f} ms of kernel time")
    for e in sorted(rows, key=lambda e: -e.self_device_time_total)[:top]:
        print(f"   {e.count:5d} x {e.self_device_time_total / 1000 / e.count * 1000:7.1f} us  {e.key[:90]}")


@torch.inference_mode()
def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dummy", default="1.7B-CustomVoice")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64, 128, 256])
    p.add_argument("--context", type=int, default=200, help="talker KV length per stream")
    p.add_argument("--kernels", type=int, nargs="*", default=[], help="batches whose kernels to list (eager)")
    p.add_argument("--few-rows", type=int, default=16, help="rows up to which the few-row kernels run (0: off)")
    p.add_argument("--conv-search", type=int, default=KernelSettings.conv_search,
                   help="cuDNN algorithms timed per convolution shape (0: the heuristic's pick)")
    args = p.parse_args()
    max_b = max(args.batches)
    engine = Engine.load(dummy=args.dummy, max_active=max_b, kv_tokens_per_stream=args.context + 64,
                         kernels=KernelSettings(few_rows=args.few_rows, conv_search=args.conv_search))
    print(f"{args.dummy} on {torch.cuda.get_device_name()}: GPU ms per stage (graph replay)")
    print("batch  predict  talk  decode  total  | per stream-frame us")
    for b in args.batches:
        calls = stage_calls(engine.runner, b, args.context)
        t_pred, t_talk, t_dec = (gpu_ms(calls[k]) for k in ("predict", "talk", "decode"))
        total = t_pred + t_talk + t_dec
        print(f"{b:5d} {t_pred:8.2f} {t_talk:5.2f} {t_dec:7.2f} {total:6.2f}  | {1000 * total / b:8.1f}", flush=True)
    for b in args.kernels:
        for name, fn in eager_calls(engine.runner, b, args.context).items():
            kernel_table(f"batch {b} {name}", fn)


if __name__ == "__main__":
    main()
