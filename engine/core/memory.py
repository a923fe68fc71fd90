"""Sizes the KV cache from what the device has left, as vLLM's --gpu-memory-utilization does (on a CPU: the RAM)."""
import logging
import os
from pathlib import Path

import torch

from engine.models.weights import ModelLoadError

log = logging.getLogger("qwen_tts_engine")
GIB = 1 << 30
MARGIN = GIB
CPU_TOKENS_PER_STREAM = 2048  # a CPU runs few streams slowly: a larger cache would only hold RAM
MIN_TOKENS = 1024            # one stream's prompt and a minute of frames


def block_bytes(runner) -> int:
    cfg, kv = runner.model.kv_layout, runner.kv
    return 2 * cfg.num_layers * runner.block_size * cfg.num_kv_heads * cfg.head_dim * kv.k.element_size()


GRAPH_FACTOR = 2.5            # capture takes more than one eager pass per stage


def available_ram() -> int:
    """The kernel's MemAvailable, or less where a cgroup (a container) limits this process."""
    try:
        meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        available = int(meminfo["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    for limit, usage in (("memory.max", "memory.current"), ("memory/memory.limit_in_bytes",
                                                           "memory/memory.usage_in_bytes")):
        try:
            root = Path("/sys/fs/cgroup")
            available = min(available, int((root / limit).read_text()) - int((root / usage).read_text()))
        except (OSError, ValueError):             # no such cgroup, or no limit ("max")
            pass
    return available


def check_weights_fit(params: int, device: torch.device) -> None:
    """Before loading: weights that cannot fit fail here in one line, not as an out-of-memory kill later."""
    need = params * 4 + MARGIN                      # built in float32, then cast to the serving dtype
    cuda = device.type == "cuda"
    free = torch.cuda.mem_get_info(device)[0] if cuda else available_ram()
    if need > free:
        raise ModelLoadError(f"not enough memory to load the model: {need / GIB:.1f} GiB needed ({params / 1e9:.2f}B "
                             f"parameters built in float32, and a margin), {free / GIB:.1f} GiB "
                             f"{'free on the GPU' if cuda else 'of RAM available'}; free memory or pick a smaller variant")


def kv_blocks_for_memory(runner, utilization: float, max_active: int, graph_bytes: int = 0) -> int:
    """`graph_bytes`: the stages' eager peak at their largest bucket (runner.graph_bytes), on a GPU."""
    if runner.device.type == "cuda":
        graphs = int(GRAPH_FACTOR * graph_bytes)
        free, total = torch.cuda.mem_get_info(runner.device)
        where, cap = "GPU", None
    else:
        graphs, free = 0, available_ram()
        total, where = free, "RAM available"
        cap = max(max_active * CPU_TOKENS_PER_STREAM // runner.block_size, runner.max_blocks)  # one stream's longest
    in_use = total - free
    budget = int(utilization * total) - in_use - graphs - MARGIN
    blocks = max(0, budget // block_bytes(runner))
    blocks = blocks if cap is None else min(blocks, cap)
    log.info("KV cache: %.1f GiB = %.2f x %.1f GiB (%s) - %.1f GiB in use - %.1f GiB for graphs - %.1f GiB margin%s: "
             "%d blocks of %d tokens (%d tokens, %.0f KiB a token)", blocks * block_bytes(runner) / GIB, utilization,
             total / GIB, where, in_use / GIB, graphs / GIB, MARGIN / GIB,
             f", at most {CPU_TOKENS_PER_STREAM} tokens a stream" if cap else "", blocks, runner.block_size,
             blocks * runner.block_size, block_bytes(runner) / runner.block_size / 1024)
    if blocks * runner.block_size < MIN_TOKENS:
        need = (MIN_TOKENS // runner.block_size * block_bytes(runner) + graphs + MARGIN) / GIB
        raise ModelLoadError(
            f"not enough memory for the KV cache: {need:.1f} GiB more is needed past the weights, and "
            f"{utilization:g} x {total / GIB:.1f} GiB ({where}) leaves {max(budget, 0) / GIB:.1f} past a "
            f"{MARGIN / GIB:.0f} GiB margin; "
            + ("raise --gpu-memory-utilization, free the GPU or lower --max-active" if cap is None else
               "free RAM, pick a smaller variant, or --dtype bfloat16 (half the weights and cache)"))
    return blocks
