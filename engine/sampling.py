"""Batched sampling on the device, with per-row parameters and no host sync.

Randomness comes from a counter-based hash of (seed, frame, codebook, token): a request draws the same
numbers whichever batch it runs in, so seeded output does not depend on the other streams."""
from dataclasses import dataclass

import torch

from . import row_sampler  # noqa: F401  (registers its kernel for sample_rows)
from .fused import ops, register

_M32 = 0xFFFFFFFF


def _mix(x: torch.Tensor) -> torch.Tensor:
    # a 32-bit integer hash (bijective); products stay below 2**63 in int64
    x = x ^ (x >> 16)
    x = (x * 0x45D9F3B) & _M32
    x = x ^ (x >> 16)
    x = (x * 0x45D9F3B) & _M32
    return x ^ (x >> 16)


def uniform(seed: torch.Tensor, counter: torch.Tensor, codebook: int, vocab: int) -> torch.Tensor:
    """[B] seeds, [B] counters -> [B, vocab] uniforms in (0, 1)."""
    base = _mix((_mix(seed & _M32) + counter * 17 + codebook) & _M32)
    token = torch.arange(vocab, device=seed.device)
    return unit(_mix((base[:, None] ^ (token[None] * 0x9E3779B1 & _M32)) & _M32))


def unit(bits: torch.Tensor) -> torch.Tensor:
    """32-bit hashes -> float32 in (0, 1), 1 excluded."""
    # 23 bits: the largest value, 1 - 2**-24, is a float32 below 1. With 24 bits it rounded to 1.0, -log(u) was 0
    # and 0/0 = NaN won the race below: a masked token (e.g. a control id) was drawn about once in 16,000 frames.
    return ((bits >> 9).float() + 0.5) / float(1 << 23)


@dataclass
class SamplingBatch:
    """Per-row sampling parameters as device tensors ([B] each)."""
    greedy: torch.Tensor       # bool
    temperature: torch.Tensor  # float
    top_k: torch.Tensor        # int64, <= 0 means off
    top_p: torch.Tensor        # float
    seed: torch.Tensor         # int64
    counter: torch.Tensor      # int64, the frame index
    all_greedy: bool           # known on the host when the batch is built

    @classmethod
    def build(cls, rows: list[tuple[bool, float, int, float, int, int]], device) -> "SamplingBatch":
        greedy, temp, top_k, top_p, seed, counter = zip(*rows)
        t = lambda v, dt: torch.tensor(v, dtype=dt, device=device)
        return cls(t(greedy, torch.bool), t(temp, torch.float32), t(top_k, torch.int64), t(top_p, torch.float32),
                   t(seed, torch.int64), t(counter, torch.int64), all(greedy))


FAULT = -1     # a drawn id that stands for "this row's logits went non-finite": the host ends its stream


def guard(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """ids [B] drawn from logits [B, V], FAULT where the row holds NaN or +inf or the id drawn was masked (-inf):
    such an id (NaN wins the race) would index past the codec's tables and fail the step of every stream."""
    drawn = logits.gather(1, ids[:, None])[:, 0]
    bad = logits.isnan().any(-1) | logits.isposinf().any(-1) | drawn.isneginf()
    return ids.masked_fill(bad, FAULT)


def sample(logits: torch.Tensor, p: SamplingBatch, codebook: int) -> torch.Tensor:
    """logits [B, V] (already processed; drawn from in float32) -> token ids [B]."""
    if p.all_greedy:
        return logits.argmax(-1)
    return ops["sample_rows"](logits, p.greedy, p.temperature, p.top_k, p.top_p, p.seed, p.counter, codebook)


def _sample_rows(logits, greedy, temperature, top_k, top_p, seed, counter, codebook: int):
    logits = logits.float()
    best = logits.argmax(-1)
    vocab = logits.shape[-1]
    scaled = logits / temperature.clamp_min(1e-5)[:, None]
    values, order = scaled.sort(dim=-1, descending=True, stable=True)   # ties by token id (row_sampler.py too)
    rank = torch.arange(vocab, device=logits.device)[None]
    k = torch.where(top_k > 0, top_k, vocab)[:, None]
    values = values.masked_fill(rank >= k, float("-inf"))
    probs = values.softmax(-1)
    before = probs.cumsum(-1) - probs                      # mass ranked above each token
    probs = probs.masked_fill((before >= top_p[:, None]) & (rank > 0), 0.0)
    u = uniform(seed, counter, codebook, vocab).gather(1, order)
    choice = (probs / -torch.log(u)).argmax(-1)            # exponential race == a multinomial draw
    return torch.where(greedy, best, order.gather(1, choice[:, None])[:, 0])


def _process_talker_logits(logits: torch.Tensor, seen: torch.Tensor, penalty: torch.Tensor,
                          allow_eos: torch.Tensor, suppress: torch.Tensor, eos: int) -> torch.Tensor:
    """Repetition penalty over generated codebook-0 ids, EOS gating, suppressed control ids (reference order)."""
    pen = penalty[:, None]
    penalized = torch.where(logits > 0, logits / pen, logits * pen)
    logits = torch.where(seen, penalized, logits)
    logits = logits.masked_fill(suppress[None], float("-inf"))
    eos_col = logits[:, eos].masked_fill(~allow_eos, float("-inf"))
    return torch.cat((logits[:, :eos], eos_col[:, None], logits[:, eos + 1:]), dim=1)


register("sample_rows", _sample_rows)
register("process_talker_logits", _process_talker_logits)


def process_talker_logits(logits, seen, penalty, allow_eos, suppress, eos: int):
    return ops["process_talker_logits"](logits, seen, penalty, allow_eos, suppress, eos)
