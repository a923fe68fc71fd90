"""Each slot's sampling settings on the device: the talker's (codebook 0) and the sub-talker's (the other codebooks)."""
import torch

from engine.core.transfer import upload
from engine.models.sampling import SamplingBatch


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

    @staticmethod
    def all_greedy(seqs, sub: bool) -> bool:
        """One captured graph per value: argmax alone where no row samples."""
        return all(not (s.request.sampling.subtalker_do_sample if sub else s.request.sampling.do_sample) for s in seqs)

    def batch(self, slots, prefix: str, counter, all_greedy: bool) -> SamplingBatch:
        g = lambda k: self.params[prefix + k][slots]
        return SamplingBatch(g("greedy"), g("temperature"), g("top_k"), g("top_p"), self.params["seed"][slots],
                             counter, all_greedy)
