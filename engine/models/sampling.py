"""Sampling through the registry's sampler, and the guard against bad logits."""
from dataclasses import dataclass

import torch

from engine.core.transfer import upload
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


class SlotSampling:
    KEYS = (("greedy", torch.bool), ("temperature", torch.float32), ("top_k", torch.int64), ("top_p", torch.float32),
            ("sub_greedy", torch.bool), ("sub_temperature", torch.float32), ("sub_top_k", torch.int64),
            ("sub_top_p", torch.float32), ("seed", torch.int64), ("penalty", torch.float32))

    def __init__(self, slots: int, device):
        self.device = device
        self.params = {k: torch.zeros(slots, dtype=dt, device=device) for k, dt in self.KEYS}

    @staticmethod
    def row(p, seed: int) -> tuple:
        return (not p.do_sample, p.temperature, p.top_k, p.top_p, not p.subtalker_do_sample, p.subtalker_temperature,
                p.subtalker_top_k, p.subtalker_top_p, seed, p.repetition_penalty)

    def write(self, slots: torch.Tensor, seqs) -> None:
        for key, values in zip(self.params, zip(*[self.row(s.request.sampling, s.seed) for s in seqs])):
            self.params[key][slots] = upload(values, self.params[key].dtype, self.device)

    def batch(self, slots, prefix: str, counter, all_greedy: bool) -> SamplingBatch:
        g = lambda k: self.params[prefix + k][slots]
        return SamplingBatch(g("greedy"), g("temperature"), g("top_k"), g("top_p"), self.params["seed"][slots],
                             counter, all_greedy)
