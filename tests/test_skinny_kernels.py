"""The few-row layer kernels (engine/kernels/few_row_layer.py), the predictor's dense attention kernel, the codec
transformer's ring attention, the codec decoder's SnakeBeta and the row sampler (engine/kernels/row_sampler.py) against the torch code they replace, run on the CPU by Triton's interpreter (float32: the interpreter mishandles bf16 products; the GPU
check covers bf16). Skipped where Triton is not installed."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
pytestmark = pytest.mark.slow                # Triton's interpreter

SCRIPT = r"""
import torch
from engine.kernels import dense_attention as da, few_row_layer, layer_math
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
    for name, got, want in zip("qkv", few_row_layer.attention_inputs(*inputs), layer_math.attention_inputs(*inputs)):
        check(name, got, want)
    args = (x, attn, wo, nw, w_gate_up, w_down, 1e-6)
    check("mlp", few_row_layer.attention_output_and_mlp(*args), layer_math.attention_output_and_mlp(*args))
assert not few_row_layer.fits_attention_inputs(16, torch.randn(17, H), *inputs[1:])     # too many rows: not here
for b, n, start in ((1, 2, 0), (3, 1, 5), (2, 1, 15)):
    ck, cv = torch.randn(b, 16, kvh, D), torch.randn(b, 16, kvh, D)
    q, packed = torch.randn(b * n, heads, D), torch.randn(b * n, 2 * kvh * D)
    k, v = packed[:, :kvh * D].view(b * n, kvh, D), packed[:, kvh * D:].view(b * n, kvh, D)   # views, rows apart
    want_k, want_v = ck.clone(), cv.clone()
    want = da.dense_attention_torch(q, k, v, want_k, want_v, start, D ** -0.5)
    check("dense", da.dense_attention(q, k, v, ck, cv, start, D ** -0.5), want)
    assert torch.equal(ck[:, :start + n], want_k[:, :start + n]) and torch.equal(cv[:, :start + n], want_v[:, :start + n])
print(worst)
assert max(worst.values()) < 1e-5, worst
"""

SAMPLER = r"""
import torch
from engine.kernels import row_sampler, sampling
torch.manual_seed(0)
rows, vocab = 6, 300                            # pads to 512: a masked tail
logits = (torch.randn(rows, vocab) * 3).to(torch.bfloat16).float()      # as the bf16 heads give: many ties
logits[:, -40:] = float("-inf")                 # suppressed ids
logits[1, :8] = logits[1].max()                 # ties at the top and across the top-k boundary
logits[2, 0], logits[2, 1] = 0.0, -0.0
logits[3, 5], logits[3, 9] = float("nan"), float("nan")     # garbage in: the first NaN, never a padding id
for greedy, temp, k, p in ((False, 0.9, 50, 1.0), (False, 1.3, 0, 0.8), (False, 0.7, 3, 0.5), (False, 1, 0, 1),
                           (False, 1, 100, 0.9), (True, 0.9, 50, 1.0)):     # no cut, few sorted, all sorted
    t = lambda v, dt: torch.full((rows,), v, dtype=dt)
    args = (logits, t(greedy, torch.bool), t(temp, torch.float32), t(k, torch.int64), t(p, torch.float32),
            torch.arange(rows) * 7919 + 3, torch.arange(rows) % 3, 4)
    got, want = row_sampler.sample_rows(*args), sampling.sample_rows(*args)
    assert torch.equal(got, want), (greedy, temp, k, p, got, want)
    assert torch.equal(row_sampler.sample_rows(logits.bfloat16(), *args[1:]), want)      # the heads' own dtype
    assert greedy or not torch.equal(got, logits.argmax(-1))      # the draws are not the argmax
"""


RING = r"""
import torch
from engine.kernels import ring_attention as ra
torch.manual_seed(0)
slots_n, heads, w, d = 6, 3, 72, 64             # the codec transformer's window: 72 ring entries, padded to 128
for positions in ([0, 5, 71], [72, 300, 143], [1, 71, 72]):    # filling, wrapped, at the edges
    b = len(positions)
    keys, values = torch.randn(slots_n, heads, w, d), torch.randn(slots_n, heads, w, d)
    q, k, v = (torch.randn(b, heads, d) for _ in range(3))
    slots, pos = torch.tensor([4, 0, 2]), torch.tensor(positions)
    want_k, want_v = keys.clone(), values.clone()
    want = ra.ring_attention_torch(q, k, v, want_k, want_v, slots, pos, d ** -0.5)
    got = ra.ring_attention(q, k, v, keys, values, slots, pos, d ** -0.5)
    assert (got - want).abs().max() < 1e-5 * want.abs().max(), positions
    assert torch.equal(keys, want_k) and torch.equal(values, want_v)
"""

PAGED = r"""
import torch
import triton.runtime.interpreter as interpreter
from engine.kernels import paged_attention as pa
patch = interpreter._patch_lang_tensor
def index_scalars(tensor, scope):                 # a loop bound read from memory: numpy 2.4 refuses int() of the
    patch(tensor, scope)                          # interpreter's one-element scalars (triton 3.6)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))
interpreter._patch_lang_tensor = index_scalars
torch.manual_seed(0)
block, kv_heads, group, d, lens = 16, 2, 2, 16, torch.tensor([1, 17, 40])
blocks = 12
k_cache, v_cache = torch.randn(blocks * block, kv_heads, d), torch.randn(blocks * block, kv_heads, d)
tables = torch.randperm(blocks - 1)[:9].view(3, 3)         # each stream's blocks, scattered
q = torch.randn(3, kv_heads * group, d)
want = pa.paged_attention_reference(q, k_cache, v_cache, tables, lens, d ** -0.5, block)
got = pa.paged_attention(q, k_cache, v_cache, tables, lens, d ** -0.5, block)
assert (got - want).abs().max() < 1e-5 * want.abs().max()
k, v = torch.randn(3, kv_heads, d), torch.randn(3, kv_heads, d)          # decode writes its token as it reads
slots = (tables.gather(1, ((lens - 1) // block)[:, None])[:, 0] * block + (lens - 1) % block)
want_k, want_v = k_cache.clone(), v_cache.clone()
want = pa.paged_attention_torch(q, want_k, want_v, tables, lens, d ** -0.5, block, (k, v, slots))
got = pa.paged_attention(q, k_cache, v_cache, tables, lens, d ** -0.5, block, (k, v, slots), one_per_stream=True)
assert (got - want).abs().max() < 1e-5 * want.abs().max()
assert torch.equal(k_cache, want_k) and torch.equal(v_cache, want_v)
"""

SNAKE = r"""
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
@triton.jit
def rint(x):
    return tl.floor(x + 0.5)
@triton.jit
def sin(x):
    return tl.sin(x)
libdevice.rint, libdevice.fast_sinf = rint, sin             # the interpreter has neither
from engine.kernels import layer_math, snake, snake_residual
torch.manual_seed(0)
for b, t, c, ctx in ((2, 5, 12, 3), (3, 7, 8, 0)):
    alpha, beta, bias = (0.3 * torch.randn(c) for _ in range(3))
    table = layer_math.snake_table(alpha, beta)
    history, wide = torch.randn(b, ctx, c), torch.randn(b, t + 3, c)
    for x in (wide[:, :t].contiguous(), wide[:, 2:2 + t]):              # contiguous, and time-strided
        for got, want in ((snake.snake(x, table), layer_math.snake(x, table)),
                          (snake.snake(x, table, bias, 8), layer_math.snake(x, table, bias, 8)),
                          (snake.snake_after(history, x, table), layer_math.snake_after(history, x, table)),
                          (snake.snake_after(history, x, table, bias),
                           layer_math.snake_after(history, x, table, bias))):
            assert got.shape == want.shape and (got - want).abs().max() < 1e-5, (b, t, c, ctx)
        padded = snake.snake(x, table, bias, 8)
        assert torch.equal(padded[..., c], torch.ones(b, t)) and not padded[..., c + 1:].any()   # the bias column
for b, t, k, n in ((2, 5, 12, 12), (3, 70, 40, 24), (1, 9, 96, 100)):     # tails in every block dimension
    alpha, beta, h_bias = (0.3 * torch.randn(k) for _ in range(3))
    table = layer_math.snake_table(alpha, beta)
    weight, bias = torch.randn(n, k) / k ** 0.5, torch.randn(n)
    base, wide = torch.randn(b, t + 2, n), torch.randn(b, t + 3, k)
    for h in (wide[:, :t].contiguous(), wide[:, 2:2 + t]):
        got, want = base.clone(), base.clone()            # x a time-strided view, as a trimmed conv's output
        assert snake_residual.fits(got[:, 1:1 + t], h, table, h_bias, weight, bias)
        snake_residual.snake_residual(got[:, 1:1 + t], h, table, h_bias, weight, bias)
        layer_math.snake_residual(want[:, 1:1 + t], h, table, h_bias, weight, bias)
        assert (got - want).abs().max() < 1e-4 and not torch.equal(got, base), (b, t, k, n)
        assert torch.equal(got[:, 0], base[:, 0]) and torch.equal(got[:, -1], base[:, -1])   # outside x: untouched
"""


@pytest.mark.parametrize("script", [SCRIPT, SAMPLER, RING, PAGED, SNAKE],
                         ids=["layers", "sampler", "ring", "paged", "snake"])
def test_kernels_match_the_torch_code_in_the_interpreter(script, tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    (tmp_path / "check.py").write_text(script)          # a file: triton.jit reads its functions' source
    run = subprocess.run([sys.executable, str(tmp_path / "check.py")], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
