"""Sizes the KV cache from what the GPU has left, as vLLM's --gpu-memory-utilization does."""
import logging

import torch

log = logging.getLogger("qwen_tts_engine")
GIB = 1 << 30
MARGIN = GIB


def block_bytes(runner) -> int:
    cfg, kv = runner.model.kv_layout, runner.kv
    return 2 * cfg.num_layers * runner.block_size * cfg.num_kv_heads * cfg.head_dim * kv.k.element_size()


GRAPH_FACTOR = 2.5            # capture takes more than one eager pass per stage


def kv_blocks_for_memory(runner, utilization: float) -> int:
    graphs = int(GRAPH_FACTOR * runner.graph_bytes())
    free, total = torch.cuda.mem_get_info(runner.device)
    in_use = total - free
    budget = int(utilization * total) - in_use - graphs - MARGIN
    blocks = max(0, budget // block_bytes(runner))
    log.info("KV cache: %.1f GiB = %.2f x %.1f GiB - %.1f GiB in use - %.1f GiB for graphs - %.1f GiB margin: "
             "%d blocks of %d tokens (%d tokens, %.0f KiB a token)", blocks * block_bytes(runner) / GIB, utilization,
             total / GIB, in_use / GIB, graphs / GIB, MARGIN / GIB, blocks, runner.block_size,
             blocks * runner.block_size, block_bytes(runner) / runner.block_size / 1024)
    if blocks == 0:
        raise RuntimeError(f"no GPU memory left for the KV cache at --gpu-memory-utilization {utilization}: "
                           f"{in_use / GIB:.1f} of {total / GIB:.1f} GiB are in use and the graphs need "
                           f"{graphs / GIB:.1f} GiB; raise it or lower --max-active")
    return blocks
