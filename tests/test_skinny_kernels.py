"""The few-row layer kernels (engine/skinny.py) and the predictor's dense attention kernel against the torch math
they replace, run on the CPU by Triton's interpreter (float32: the interpreter mishandles bf16 products; the GPU
check covers bf16). Skipped where Triton is not installed."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

SCRIPT = r"""
import torch
from engine import dense_attention as da, fused, skinny
torch.manual_seed(0)
H, heads, kvh, D, I = 256, 4, 2, 128, 384
worst = {}
def check(name, got, want):
    err = ((got - want).abs().max() / want.abs().max()).item()
    worst[name] = max(worst.get(name, 0.0), err)
for m in (1, 2, 16):
    x, attn = torch.randn(m, H), torch.randn(m, heads * D)
    nw, qn, kn = 1 + 0.1 * torch.randn(H), 1 + 0.1 * torch.randn(D), 1 + 0.1 * torch.randn(D)
    w_qkv, wo = 0.05 * torch.randn((heads + 2 * kvh) * D, H), 0.05 * torch.randn(H, heads * D)
    w_gate_up, w_down = 0.05 * torch.randn(2 * I, H), 0.05 * torch.randn(H, I)
    angles = torch.randint(0, 500, (m, 1)).float() * 10000 ** (-torch.arange(0, D, 2) / D)
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
    if m == 16:                       # a batch at one position: one row of the tables serves every row
        cos, sin = cos[:1], sin[:1]
    inputs = (x, nw, w_qkv, heads * D, qn, kn, cos, sin, 1e-6, D)
    for name, got, want in zip("qkv", skinny.attention_inputs(*inputs), fused.attention_inputs(*inputs)):
        check(name, got, want)
    args = (x, attn, wo, nw, w_gate_up, w_down, 1e-6)
    check("mlp", skinny.attention_output_and_mlp(*args), fused.attention_output_and_mlp(*args))
assert skinny.attention_inputs(torch.randn(17, H), *inputs[1:]) is NotImplemented     # too many rows: not here
for b, n, start in ((1, 2, 0), (3, 1, 5), (2, 1, 15)):
    ck, cv = torch.randn(b, 16, kvh, D), torch.randn(b, 16, kvh, D)
    q, packed = torch.randn(b * n, heads, D), torch.randn(b * n, 2 * kvh * D)
    k, v = packed[:, :kvh * D].view(b * n, kvh, D), packed[:, kvh * D:].view(b * n, kvh, D)   # views, rows apart
    want_k, want_v = ck.clone(), cv.clone()
    want = da.dense_attention_reference(q, k, v, want_k, want_v, start, D ** -0.5)
    check("dense", da.dense_attention(q, k, v, ck, cv, start, D ** -0.5), want)
    assert torch.equal(ck[:, :start + n], want_k[:, :start + n]) and torch.equal(cv[:, :start + n], want_v[:, :start + n])
print(worst)
assert max(worst.values()) < 1e-5, worst
"""


def test_kernels_match_the_torch_math_in_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
