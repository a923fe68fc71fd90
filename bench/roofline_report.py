"""stage_bench's roofline: per batch, each stage's measured ms beside its counted work (bench/roofline.py), the share
of the GPU's limits reached and the floor they allow; the memory the largest batch holds."""
import math
import time

import torch

from bench.roofline import Cost, reached, stage_costs
from bench.startup_bench import commit
from engine.models.qwen3_tts.codec.decoder import CodecDecoder
from engine.models.qwen3_tts.codec.layers import Stateful
from engine.models.qwen3_tts.model import parameters

GIB = 1 << 30
STAGES = ("predict", "talk", "decode")


def codec_state_bytes(codec: dict, itemsize: int) -> int:
    """The codec decoder's state a stream holds: its attention window and every conv's history."""
    with torch.device("meta"):
        decoder = CodecDecoder(codec)
    return sum(math.prod(shape) * (dtype.itemsize if dtype else itemsize) for m in decoder.modules()
               if isinstance(m, Stateful) for shape, dtype in m.state_specs.values())


def memory_plan(cfg, streams: int, context: int, block: int, itemsize: int, kv_itemsize: int | None = None) -> dict:
    """GiB held for `streams` streams of `context` KV tokens (whole blocks) beside the weights; activations and
    graph pools come on top (measured: peak_allocated_gib)."""
    t, p = cfg.talker, cfg.predictor
    kv_token = 2 * t.num_layers * t.num_kv_heads * t.head_dim * (kv_itemsize or itemsize)
    predictor = 2 * p.num_layers * cfg.num_code_groups * p.num_kv_heads * p.head_dim * itemsize
    plan = dict(streams=streams, context=context, weights_gib=parameters(cfg) * itemsize / GIB,
                kv_gib=streams * -(-context // block) * block * kv_token / GIB,
                codec_state_gib=streams * codec_state_bytes(cfg.codec, itemsize) / GIB,
                predictor_cache_gib=streams * predictor / GIB)
    return dict(plan, total_gib=sum(plan[k] for k in plan if k.endswith("_gib")))


def report(model, device: str, context: int, block: int, timed: list[tuple[int, dict]], tflops: float,
           tbps: float, kv_itemsize: int | None = None) -> dict:
    """`timed`: (batch, {stage: ms}) as measured; `kv_itemsize`: the KV cache's bytes a value, if not the model's."""
    cfg, itemsize = model.cfg, model.dtype.itemsize
    batches = []
    for batch, ms in timed:
        costs = stage_costs(cfg, cfg.codec, batch, context, itemsize, kv_itemsize)
        row = {name: reached(costs[name], ms[name], tflops, tbps) for name in STAGES}
        step = reached(sum((costs[name] for name in STAGES), Cost(itemsize)), sum(ms.values()), tflops, tbps)
        step.update(floor_ms=sum(row[name]["floor_ms"] for name in STAGES), bound="stages in turn")
        batches.append(dict(batch=batch, **row, step=step))
    out = dict(model=model.name, device=device, dtype=str(model.dtype).removeprefix("torch."), commit=commit(),
               date=time.strftime("%Y-%m-%d"), context=context, limits=dict(tflops=tflops, tbps=tbps),
               batches=batches, memory=memory_plan(cfg, max(b for b, _ in timed), context, block, itemsize, kv_itemsize))
    if torch.cuda.is_available():
        out["memory"].update(peak_allocated_gib=torch.cuda.max_memory_allocated() / GIB,
                             device_gib=torch.cuda.mem_get_info()[1] / GIB)
    return out


def print_report(r: dict) -> None:
    lim = r["limits"]
    print(f"\nroofline at context {r['context']} ({r['dtype']}; limits {lim['tflops']:g} TFLOP/s dense, "
          f"{lim['tbps']:g} TB/s; floor: the least time the limits allow a stage, a step its stages in turn)")
    print("batch stage        ms    GFLOP      GB  TFLOP/s   TB/s  %TF/s %TB/s  floor ms  bound")
    for b in r["batches"]:
        for name in STAGES + ("step",):
            s = b[name]
            print(f"{b['batch']:5d} {name:8s} {s['ms']:7.2f} {s['gflop']:8.1f} {s['gb']:7.2f} {s['tflops']:8.1f} "
                  f"{s['tbps']:6.2f} {100 * s['tflops_share']:5.1f} {100 * s['tbps_share']:5.1f} {s['floor_ms']:9.2f}  "
                  f"{s['bound']}")
    m = r["memory"]
    measured = f"; measured peak {m['peak_allocated_gib']:.1f} of {m['device_gib']:.1f} GiB" if "device_gib" in m \
        else ""
    print(f"memory of {m['streams']} streams at {m['context']} tokens: weights {m['weights_gib']:.1f} + KV "
          f"{m['kv_gib']:.1f} + codec state {m['codec_state_gib']:.1f} + predictor cache "
          f"{m['predictor_cache_gib']:.1f} = {m['total_gib']:.1f} GiB before activations{measured}")
