"""Sampling through the registry's sampler, and the guard against bad logits."""
from dataclasses import dataclass

import torch

from engine.kernels.registry import ops


@dataclass
class SamplingBatch:
    greedy: torch.Tensor
    temperature: torch.Tensor
    top_k: torch.Tensor        # <= 0: off
    top_p: torch.Tensor
    seed: torch.Tensor
    counter: torch.Tensor
    all_greedy: bool


FAULT = -1     # stands for non-finite logits: the host ends the stream


def guard(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Such an id would index past the codec's tables and fail every stream's step."""
    drawn = logits.gather(1, ids[:, None])[:, 0]
    bad = logits.isnan().any(-1) | logits.isposinf().any(-1) | drawn.isneginf()
    return ids.masked_fill(bad, FAULT)


def sample(logits: torch.Tensor, p: SamplingBatch, codebook: int) -> torch.Tensor:
    if p.all_greedy:
        return logits.argmax(-1)
    return ops.sample_rows(logits, p.greedy, p.temperature, p.top_k, p.top_p, p.seed, p.counter, codebook)
