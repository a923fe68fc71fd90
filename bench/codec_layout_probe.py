"""Which conv formulation is fastest for the codec decoder's shapes (one frame per stream, batch B)?

A: today's NCL conv1d / conv_transpose1d on cat([history, x]);
B: NHWC (channels-last) conv2d on [B, T, C] activations;
C: [B, T, C] activations, conv as GEMMs (k7: taps accumulated; transposed conv: one GEMM + a shifted add)."""
import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stage_bench import gpu_ms as ms  # noqa: E402


def conv_variants(B, C, T, d, dt):
    ctx = 6 * d
    w = torch.randn(C, C, 7, device="cuda", dtype=dt) * 0.02
    hist_ncl = torch.randn(B, C, ctx, device="cuda", dtype=dt)
    x_ncl = torch.randn(B, C, T, device="cuda", dtype=dt)
    hist_btc = hist_ncl.transpose(1, 2).contiguous()
    x_btc = x_ncl.transpose(1, 2).contiguous()
    w4 = w[:, :, None].contiguous(memory_format=torch.channels_last)
    taps = w.permute(2, 1, 0).contiguous()          # [7, Cin, Cout]
    wim = w.permute(0, 2, 1).reshape(C, 7 * C)      # [Cout, 7*Cin]

    def a():
        return F.conv1d(torch.cat([hist_ncl, x_ncl], -1), w, dilation=d)

    def b():
        xp = torch.cat([hist_btc, x_btc], 1)
        return F.conv2d(xp.transpose(1, 2)[:, :, None], w4, dilation=(1, d)).squeeze(2).transpose(1, 2)

    def c():
        xp = torch.cat([hist_btc, x_btc], 1)
        y = torch.matmul(xp[:, :T], taps[0])
        for k in range(1, 7):
            y.add_(torch.matmul(xp[:, k * d:k * d + T], taps[k]))
        return y

    def c_im2col():
        xp = torch.cat([hist_btc, x_btc], 1)
        cols = torch.stack([xp[:, k * d:k * d + T] for k in range(7)], 2)   # [B, T, 7, C]
        return F.linear(cols.flatten(2), wim)
    ref = a().float()
    for f in (b, c, c_im2col):
        got = f().float().transpose(1, 2)
        assert (got - ref).abs().max() < 0.05 * ref.abs().max(), f.__name__
    return dict(ncl=ms(a), nhwc=ms(b), taps=ms(c), im2col=ms(c_im2col))


def trans_variants(B, Ci, Co, T, r, dt):
    k = 2 * r
    w = torch.randn(Ci, Co, k, device="cuda", dtype=dt) * 0.02
    hist_ncl = torch.randn(B, Ci, 1, device="cuda", dtype=dt)
    x_ncl = torch.randn(B, Ci, T, device="cuda", dtype=dt)
    hist_btc = hist_ncl.transpose(1, 2).contiguous()
    x_btc = x_ncl.transpose(1, 2).contiguous()
    wm = w.permute(0, 2, 1).reshape(Ci, k * Co)      # [Ci, k*Co]: tap j of input t lands at t*r + j
    w4 = w[:, :, None].contiguous(memory_format=torch.channels_last)

    def a():
        return F.conv_transpose1d(torch.cat([hist_ncl, x_ncl], -1), w, stride=r)[..., r:r + T * r]

    def b():
        xp = torch.cat([hist_btc, x_btc], 1)
        y = F.conv_transpose2d(xp.transpose(1, 2)[:, :, None], w4, stride=(1, r)).squeeze(2)
        return y[..., r:r + T * r].transpose(1, 2)

    def c():
        xp = torch.cat([hist_btc, x_btc], 1)                          # [B, T+1, Ci]
        y = torch.matmul(xp, wm).view(B, T + 1, 2, r, Co)
        return (y[:, 1:, 0] + y[:, :-1, 1]).reshape(B, T * r, Co)
    ref = a().float()
    for f in (b, c):
        got = f().float().transpose(1, 2)
        assert (got - ref).abs().max() < 0.05 * ref.abs().max(), f.__name__
    return dict(ncl=ms(a), nhwc=ms(b), gemm=ms(c))


def snake_variants(B, C, T, dt):
    cs = torch.compile(lambda x, a, b: x + torch.sin(x * a.exp()[:, None]).pow(2) * (1.0 / (b.exp()[:, None] + 1e-9)),
                       dynamic=True)
    alpha, beta = torch.zeros(C, device="cuda"), torch.zeros(C, device="cuda")
    x = torch.randn(B, C, T, device="cuda", dtype=dt)
    xt = x.transpose(1, 2).contiguous()
    btc = torch.compile(lambda x, a, b: x + torch.sin(x * a.exp()).pow(2) * (1.0 / (b.exp() + 1e-9)), dynamic=True)
    return dict(bct=ms(lambda: cs(x, alpha, beta)), btc=ms(lambda: btc(xt, alpha, beta)))


@torch.inference_mode()
def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batches", type=int, nargs="+", default=[64, 256, 512])
    args = p.parse_args()
    torch.backends.cudnn.benchmark = True
    dt = torch.bfloat16
    levels = [(1536, 768, 4, 8), (768, 384, 32, 5), (384, 192, 160, 4), (192, 96, 640, 3)]
    for B in args.batches:
        tot = {}
        for ci, co, t, r in levels:
            tv = trans_variants(B, ci, co, t, r, dt)
            line = [f"B={B} trans {ci}->{co} T={t}x{r}: " + " ".join(f"{k}={v:.3f}" for k, v in tv.items())]
            for k, v in tv.items():
                tot[("trans", k)] = tot.get(("trans", k), 0) + v
            for d in (1, 3, 9):
                cv = conv_variants(B, co, t * r, d, dt)
                line.append(f"  conv C={co} T={t * r} d={d}: " + " ".join(f"{k}={v:.3f}" for k, v in cv.items()))
                for k, v in cv.items():
                    tot[("conv", k)] = tot.get(("conv", k), 0) + v
            sv = snake_variants(B, co, t * r, dt)
            line.append(f"  snake C={co} T={t * r}: " + " ".join(f"{k}={v:.3f}" for k, v in sv.items()))
            print("\n".join(line), flush=True)
        print(f"B={B} totals (ms): " + " ".join(f"{a}/{b}={v:.2f}" for (a, b), v in tot.items()), flush=True)


if __name__ == "__main__":
    main()
