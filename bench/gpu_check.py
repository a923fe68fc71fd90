"""GPU equivalence checks: the Triton paged attention against the torch reference, and greedy outputs of the
graph + kernel path against the eager reference path (same requests, batched). Exits non-zero on a mismatch."""
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import Engine, SamplingParams, SynthesisRequest  # noqa: E402
from engine import paged_attention  # noqa: E402


def check_kernel() -> None:
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        b, heads, kv_heads, d, bs = 37, 16, 8, 128, 64
        lens = torch.randint(1, 900, (b,), device="cuda")
        blocks = torch.randperm(b * 16, device="cuda")[: b * 15].view(b, 15)
        kc = torch.randn(b * 16 * bs, kv_heads, d, device="cuda", dtype=dtype)
        vc = torch.randn_like(kc)
        q = torch.randn(b, heads, d, device="cuda", dtype=dtype)
        ref = paged_attention.paged_attention_reference(q.float(), kc.float(), vc.float(), blocks, lens, d ** -0.5, bs)
        out = paged_attention.paged_attention(q, kc, vc, blocks, lens, d ** -0.5, bs).float()
        err = ((out - ref).norm() / ref.norm()).item()
        print(f"paged kernel {dtype}: relative error {err:.2e}")
        assert err < (1e-5 if dtype == torch.float32 else 1e-2)


def check_snake() -> None:
    """The Triton SnakeBeta against fused.py's torch math (float32): plain, with a bias, behind a history, and on a
    time-strided input (a transposed conv's trimmed output)."""
    from engine import fused
    from engine.codec import snake
    torch.manual_seed(0)
    worst = 0.0
    for b, t, c, ctx in ((1, 4, 1536, 6), (7, 640, 192, 54), (33, 1920, 96, 18), (5, 160, 384, 0)):
        alpha, beta, bias = (0.3 * torch.randn(c, device="cuda") for _ in range(3))
        history = torch.randn(b, ctx, c, device="cuda")
        wide = torch.randn(b, t + 3, c, device="cuda")
        for x in (wide[:, :t].contiguous(), wide[:, 2:2 + t]):
            pairs = [(snake.snake(x, alpha, beta), fused.snake(x, alpha, beta)),
                     (snake.snake(x, alpha, beta, bias), fused.snake(x, alpha, beta, bias)),
                     (snake.snake_after(history, x, alpha, beta), fused.snake_after(history, x, alpha, beta))]
            for got, want in pairs:
                assert got.shape == want.shape
                worst = max(worst, (got - want).abs().max().item())
    print(f"snake kernel float32: max abs difference {worst:.2e}")
    assert worst < 1e-5


def run(engine, requests):
    handles = [engine.submit(r) for r in requests]
    return [torch.cat([torch.from_numpy(c.codes) for c in h.iter_blocking()]) for h in handles]


def requests():
    texts = ["Hello there, this is the first stream.", "A second, much longer stream that keeps talking about "
             "trains, weather and hotels for a while.", "Third."]
    return [SynthesisRequest(text=t, voice=v, sampling=SamplingParams.greedy(), max_frames=n, ignore_eos=True)
            for t, v, n in zip(texts, ("vivian", "ryan", "aiden"), (90, 120, 40))]


def check_paths(dummy: str, dtype: str) -> None:
    outputs = {}
    for name, graphs, kernel in (("graphs+kernel", True, True), ("eager+kernel", False, True),
                                 ("eager+torch attention", False, False)):
        paged_attention.USE_KERNEL = kernel
        t0 = time.perf_counter()
        engine = Engine.load(dummy=dummy, dtype=dtype, max_seqs=8, use_graphs=graphs).start()
        outputs[name] = run(engine, requests())
        engine.shutdown()
        print(f"{dummy} {dtype} {name}: {time.perf_counter() - t0:.1f}s", flush=True)
    paged_attention.USE_KERNEL = True
    fast = outputs["graphs+kernel"]
    for name in ("eager+kernel", "eager+torch attention"):
        same = [bool(torch.equal(x, y)) for x, y in zip(fast, outputs[name])]
        first = [int((x != y).any(1).nonzero()[0]) if not s else -1 for x, y, s in zip(fast, outputs[name], same)]
        print(f"{dummy} {dtype}: graphs+kernel vs {name}: identical per request {same} (first differing frame {first})")
        assert all(same) or (dtype != "float32" and name == "eager+torch attention")


if __name__ == "__main__":
    check_kernel()
    check_snake()
    for dtype in sys.argv[1:] or ("float32", "bfloat16"):      # e.g. `gpu_check.py float32`
        check_paths("1.7B-CustomVoice", dtype)
