"""The device sampler: a seeded draw never leaves the allowed tokens, whatever its counter."""
import pytest
import torch

from engine.kernels.sampling import _M32, sample_rows, unit

VOCAB, ALLOWED, TOP_K = 3072, 2048, 50


def test_uniforms_stay_inside_zero_one_at_the_extreme_hashes():
    u = unit(torch.tensor([0, 1, _M32 - 1, _M32]))
    assert (u > 0).all() and (u < 1).all() and (-torch.log(u) > 0).all()


@pytest.mark.slow                                   # thousands of sampled rows
def test_sampled_codebook0_is_always_an_allowed_top_k_token():
    # counter 2752 of seed 0 is where the former 24-bit uniform rounded to 1.0 on control id 2194, which was drawn
    rows = 4000
    logits = torch.randn(rows, VOCAB, generator=torch.Generator().manual_seed(0))
    logits[:, ALLOWED:] = float("-inf")             # control ids, suppressed as the runner does
    full = lambda v, dt: torch.full((rows,), v, dtype=dt)
    drawn = sample_rows(logits, full(False, torch.bool), full(0.9, torch.float32), full(TOP_K, torch.int64),
                         full(1.0, torch.float32), full(0, torch.int64), torch.arange(rows), codebook=0)
    assert (drawn < ALLOWED).all()
    top = logits.topk(TOP_K, dim=-1).indices
    assert (top == drawn[:, None]).any(-1).all()
