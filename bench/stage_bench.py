"""GPU time of each per-frame stage by batch size (graph replays timed with CUDA events), and what one engine
step costs on the host: the gap between the two is launch and Python overhead."""
import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import Engine  # noqa: E402


def gpu_ms(fn, reps: int = 20) -> float:
    fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def stage_calls(r, b: int, context: int) -> dict:
    """Zero-argument calls of each stage at batch b, with a plausible talker KV layout of `context` tokens."""
    dev = r.device
    slots = torch.arange(b, device=dev)
    blocks_per = -(-context // r.kv.block_size)
    r.kv.tables[:b, :blocks_per] = torch.arange(b * blocks_per, device=dev).view(b, blocks_per)
    positions = torch.full((b,), context - 1, device=dev)
    zeros = torch.zeros(b, dtype=torch.int64, device=dev)
    codes = torch.randint(0, 2048, (b, 16), device=dev)
    return dict(predict=lambda: r.predict_stage(False, slots),
                talk=lambda: r.talk_stage(False, slots, zeros, positions, zeros.bool()),
                decode=lambda: r.decode_stage(None, slots, codes))


@torch.inference_mode()
def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dummy", default="1.7B-CustomVoice")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64, 128, 256])
    p.add_argument("--context", type=int, default=200, help="talker KV length per stream")
    args = p.parse_args()
    max_b = max(args.batches)
    engine = Engine.load(dummy=args.dummy, max_seqs=max_b, kv_tokens_per_seq=args.context + 64)
    print(f"{args.dummy} on {torch.cuda.get_device_name()}: GPU ms per stage (graph replay)")
    print("batch  predict  talk  decode  total  | per stream-frame us")
    for b in args.batches:
        calls = stage_calls(engine.runner, b, args.context)
        t_pred, t_talk, t_dec = (gpu_ms(calls[k]) for k in ("predict", "talk", "decode"))
        total = t_pred + t_talk + t_dec
        print(f"{b:5d} {t_pred:8.2f} {t_talk:5.2f} {t_dec:7.2f} {total:6.2f}  | {1000 * total / b:8.1f}", flush=True)


if __name__ == "__main__":
    main()
