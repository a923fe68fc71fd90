"""Sampling in torch, the definition; a counter-based hash keeps seeded output independent of the batch."""
import torch

_M32 = 0xFFFFFFFF


def _mix(x: torch.Tensor) -> torch.Tensor:
    x = x ^ (x >> 16)
    x = (x * 0x45D9F3B) & _M32
    x = x ^ (x >> 16)
    x = (x * 0x45D9F3B) & _M32
    return x ^ (x >> 16)


def uniform(seed: torch.Tensor, counter: torch.Tensor, codebook: int, vocab: int) -> torch.Tensor:
    base = _mix((_mix(seed & _M32) + counter * 17 + codebook) & _M32)
    token = torch.arange(vocab, device=seed.device)
    return unit(_mix((base[:, None] ^ (token[None] * 0x9E3779B1 & _M32)) & _M32))


def unit(bits: torch.Tensor) -> torch.Tensor:
    # 23 bits: with 24, u could round to 1.0 and a masked token win the race
    return ((bits >> 9).float() + 0.5) / float(1 << 23)


def sample_rows(logits, greedy, temperature, top_k, top_p, seed, counter, codebook: int):
    logits = logits.float()
    best = logits.argmax(-1)
    vocab = logits.shape[-1]
    scaled = logits / temperature.clamp_min(1e-5)[:, None]
    values, order = scaled.sort(dim=-1, descending=True, stable=True)
    rank = torch.arange(vocab, device=logits.device)[None]
    k = torch.where(top_k > 0, top_k, vocab)[:, None]
    values = values.masked_fill(rank >= k, float("-inf"))
    probs = values.softmax(-1)
    before = probs.cumsum(-1) - probs
    probs = probs.masked_fill((before >= top_p[:, None]) & (rank > 0), 0.0)
    u = uniform(seed, counter, codebook, vocab).gather(1, order)
    choice = (probs / -torch.log(u)).argmax(-1)            # exponential race == a multinomial draw
    return torch.where(greedy, best, order.gather(1, choice[:, None])[:, 0])


def process_talker_logits(logits: torch.Tensor, seen: torch.Tensor, penalty: torch.Tensor,
                          allow_eos: torch.Tensor, suppress: torch.Tensor, eos: int) -> torch.Tensor:
    pen = penalty[:, None]
    penalized = torch.where(logits > 0, logits / pen, logits * pen)
    logits = torch.where(seen, penalized, logits)
    logits = logits.masked_fill(suppress[None], float("-inf"))
    eos_col = logits[:, eos].masked_fill(~allow_eos, float("-inf"))
    return torch.cat((logits[:, :eos], eos_col[:, None], logits[:, eos + 1:]), dim=1)

