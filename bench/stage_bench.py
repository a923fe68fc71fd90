"""GPU time of each per-frame stage by batch size (graph replays timed with CUDA events; on a CPU, eager calls timed
by the wall clock), beside the work each must do and the share of the GPU's limits it reaches (bench/roofline.py).

python3 bench/stage_bench.py --dummy 1.7B-CustomVoice --batches 512 1024 2048 --json stages.json
--codec-conv cudnn gemm: the decode stage's graphs captured and timed with each of the codec's conv choices in turn."""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import Engine, SamplingParams  # noqa: E402
from engine.core.graphs import decode_buckets_up_to  # noqa: E402
from engine.kernels.registry import CODEC_CONVS, KV_CACHES, WEIGHTS, KernelSettings, codec_conv_ops, ops  # noqa: E402
from bench.conv_shapes import decode_conv_shapes  # noqa: E402
from bench.roofline import PEAK_TBPS, PEAK_TFLOPS  # noqa: E402
from bench.roofline_report import print_report, report  # noqa: E402


def once_ms(fn) -> float:
    if not torch.cuda.is_available():
        start = time.perf_counter()
        fn()
        return 1000 * (time.perf_counter() - start)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b)


def gpu_ms(fn, reps: int = 20) -> float:
    """The median of `reps` calls after one untimed: CUDA events on a GPU, the wall clock on a CPU."""
    fn()
    return statistics.median(once_ms(fn) for _ in range(reps))


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


def kernel_table(name: str, fn, top: int = 20) -> dict:
    """Kernels one call of a stage launches: count, their summed GPU time, and the costliest by name, then the ops
    (with their input shapes) that launched the costliest (printed and returned)."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        fn()
        torch.cuda.synchronize()
    rows = [e for e in prof.key_averages() if e.device_type.name == "CUDA" and e.count]
    kernels = sum(e.count for e in rows)
    total_ms = sum(e.self_device_time_total for e in rows) / 1000
    print(f"{name}: {kernels} kernels, {total_ms:.2f} ms of kernel time")
    costliest = [(e.count, e.self_device_time_total / e.count, e.key) for e in
                 sorted(rows, key=lambda e: -e.self_device_time_total)[:top]]
    for count, us, key in costliest:
        print(f"   {count:5d} x {us:7.1f} us  {key[:90]}")
    launched = sorted((e for e in prof.key_averages(group_by_input_shape=True)
                       if e.device_type.name == "CPU" and e.self_device_time_total > 0),
                      key=lambda e: -e.self_device_time_total)[:top]
    print("   launched by:")
    for e in launched:
        print(f"   {e.count:5d} x {e.self_device_time_total / e.count:7.1f} us  {e.key[:40]} {str(e.input_shapes)[:110]}")
    return dict(kernels=kernels, ms=total_ms, costliest=[dict(count=c, us=us, name=k) for c, us, k in costliest],
                ops=[dict(count=e.count, us=e.self_device_time_total / e.count, name=e.key,
                          shapes=str(e.input_shapes)) for e in launched])


def capture_s(calls) -> float:
    """Seconds to capture the graphs these first calls make, largest batch first as serve does."""
    t0 = time.perf_counter()
    for call in calls:
        call()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def decode_with(r, conv: str, settings: KernelSettings, batches: list[int], context: int, reps: int) -> dict:
    """The decode stage with the codec's convolutions as `conv`: its graphs captured anew, each batch timed. An eager
    decode of one stream first, so capture seconds hold the search of the batches' shapes, not the first compiles."""
    cuda = r.device.type == "cuda"
    vars(ops).update(codec_conv_ops(conv, compiled=cuda and settings.compile))
    r.decode_stage.release()                    # the previous choice's graphs and memory, before these capture
    kept, r.decode_stage.use_graphs = r.decode_stage.use_graphs, False
    stage_calls(r, 1, context)["decode"]()
    r.decode_stage.use_graphs = kept
    calls = {b: stage_calls(r, b, context)["decode"] for b in batches}
    seconds = {b: capture_s([calls[b]]) for b in sorted(batches, reverse=True)} if cuda else {}
    ms = {b: gpu_ms(calls[b], reps) for b in batches}
    ladder = r.decode_stage.buckets
    whole = {}
    for b in (b for b in batches if cuda and b > ladder[-1]):    # serve replays the largest graph in slices
        try:
            r.decode_stage.buckets = ladder + [b]
            whole[b] = gpu_ms(calls[b], reps)
        finally:
            r.decode_stage.buckets = ladder
            r.decode_stage.graphs.pop((b, None), None)
    print(f"codec convolutions {conv}: decode ms " + ", ".join(f"{b}: {ms[b]:.2f}" for b in batches) +
          "".join(f" ({b} in one graph instead of slices of {ladder[-1]}: {t:.2f})" for b, t in whole.items()) +
          "; graphs captured in " + ", ".join(f"{b}: {t:.1f} s" for b, t in seconds.items()), flush=True)
    return dict(capture_s=seconds, ms=ms, one_graph_ms=whole,
                cudnn_conv_shapes={b: decode_conv_shapes(r.model.cfg.codec, b, conv) for b in batches})


@torch.inference_mode()
def main(argv=None) -> dict:
    p = argparse.ArgumentParser()
    p.add_argument("--dummy", default="1.7B-CustomVoice")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64, 128, 256])
    p.add_argument("--context", type=int, default=200, help="talker KV length per stream")
    p.add_argument("--kernels", type=int, nargs="*", default=[], help="batches whose kernels to list (eager)")
    p.add_argument("--few-rows", type=int, default=16, help="rows up to which the few-row kernels run (0: off)")
    p.add_argument("--conv-search", type=int, default=KernelSettings.conv_search,
                   help="cuDNN algorithms timed per convolution shape (0: the heuristic's pick)")
    p.add_argument("--conv-search-past", type=int, default=KernelSettings.conv_search_past,
                   help="codec batches up to this take cuDNN's heuristic pick, unsearched (0: every batch searched)")
    p.add_argument("--codec-conv", nargs="+", choices=CODEC_CONVS, default=[KernelSettings.codec_conv],
                   help="the codec decoder's convolutions; several: its graphs captured and timed with each in turn")
    p.add_argument("--kv-cache", choices=tuple(KV_CACHES), default="auto", help="the talker's KV cache dtype")
    p.add_argument("--weights", choices=WEIGHTS, default="auto", help="the decoder layers' projections (fp8: serve's "
                   "--weights-dtype fp8)")
    p.add_argument("--max-active", type=int, default=1024, help="serve's, for the start-up count of conv searches")
    p.add_argument("--reps", type=int, default=20, help="timed calls per stage and batch; their median is kept")
    p.add_argument("--json", help="write the per-stage roofline of every batch here")
    p.add_argument("--peak-tflops", type=float, default=PEAK_TFLOPS,
                   help=f"the GPU's dense bf16 limit, TFLOP/s (default: H100 SXM, {PEAK_TFLOPS:g})")
    p.add_argument("--peak-tbps", type=float, default=PEAK_TBPS,
                   help=f"its memory bandwidth, TB/s (default: H100 SXM's HBM3, {PEAK_TBPS:g})")
    args = p.parse_args(argv)
    settings = KernelSettings(few_rows=args.few_rows, conv_search=args.conv_search,
                              conv_search_past=args.conv_search_past, codec_conv=args.codec_conv[0],
                              kv_cache=args.kv_cache, weights=args.weights)
    engine = Engine.load(dummy=args.dummy, max_active=max(args.batches),
                         kv_tokens_per_stream=-(-args.context // 64) * 64, kernels=settings, use_graphs=False)
    r, cuda = engine.runner, engine.model.device.type == "cuda"
    if cuda:                    # graphs for the batches asked only, not every bucket
        for stage in (r.predict_stage, r.talk_stage, r.decode_stage):
            stage.use_graphs = True
        seconds = capture_s([call for b in sorted(args.batches, reverse=True)
                             for name, call in stage_calls(r, b, args.context).items() if name != "decode"])
        print(f"predict and talk graphs of {len(args.batches)} batches captured in {seconds:.1f} s")
    device = torch.cuda.get_device_name() if cuda else "CPU"
    steps = {b: {k: gpu_ms(call, args.reps) for k, call in stage_calls(r, b, args.context).items() if k != "decode"}
             for b in args.batches}
    decodes = {conv: decode_with(r, conv, settings, args.batches, args.context, args.reps) for conv in args.codec_conv}
    print(f"{args.dummy} on {device}: {'GPU ms per stage (graph replay)' if cuda else 'ms per stage (eager)'}; "
          f"cuDNN search {args.conv_search or 'off'}")
    print("batch  predict  talk  codec-conv  decode  total  | per stream-frame us | decode capture s  cuDNN shapes")
    for b in args.batches:
        for conv, d in decodes.items():
            total = sum(steps[b].values()) + d["ms"][b]
            print(f"{b:5d} {steps[b]['predict']:8.2f} {steps[b]['talk']:5.2f}  {conv:>10s} {d['ms'][b]:7.2f} "
                  f"{total:6.2f}  | {1000 * total / b:8.1f}            | {d['capture_s'].get(b, 0):16.2f}  "
                  f"{d['cudnn_conv_shapes'][b]:12d}", flush=True)
    buckets = decode_buckets_up_to(args.max_active, graphs=True)
    searched = [b for b in buckets if args.conv_search and b > args.conv_search_past]
    print(f"cuDNN conv shapes a start-up searches at --max-active {args.max_active} ({len(buckets)} decode graphs, "
          f"{len(searched)} searched): " + ", ".join(
              f"{conv} {sum(decode_conv_shapes(engine.model.cfg.codec, b, conv) for b in searched)}"
              for conv in args.codec_conv))
    results = {conv: report(engine.model, device, args.context, r.block_size,
                            [(b, dict(steps[b], decode=d["ms"][b])) for b in args.batches], args.peak_tflops,
                            args.peak_tbps, r.kv.k.element_size()) for conv, d in decodes.items()}
    for conv, result in results.items():
        print(f"\ncodec convolutions: {conv}", end="")
        print_report(result)
        result.update(codec_conv=conv, kv_cache=args.kv_cache, weights=args.weights, decode_capture_s=decodes[conv]["capture_s"],
                      cudnn_conv_shapes=decodes[conv]["cudnn_conv_shapes"])
    result = results[args.codec_conv[0]]
    if len(results) > 1:
        result = dict(result, by_codec_conv=results)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    for b in args.kernels:
        for name, fn in eager_calls(engine.runner, b, args.context).items():
            kernel_table(f"batch {b} {name}", fn)
    return result


if __name__ == "__main__":
    main()
