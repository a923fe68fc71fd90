"""Top GPU kernels of each per-frame stage (eager, compiled kernels on) at a few batch sizes."""
import argparse
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stage_bench import stage_calls  # noqa: E402
from engine import Engine  # noqa: E402


@torch.inference_mode()
def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dummy", default="1.7B-CustomVoice")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 256])
    p.add_argument("--rows", type=int, default=12)
    args = p.parse_args()
    engine = Engine.load(dummy=args.dummy, max_seqs=max(args.batches), kv_tokens_per_seq=264, use_graphs=False)
    for b in args.batches:
        for name, call in stage_calls(engine.runner, b, 200).items():
            call()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                call()
                torch.cuda.synchronize()
            events = prof.key_averages()
            total = sum(e.self_device_time_total for e in events) / 1000
            count = sum(e.count for e in events if e.self_device_time_total > 0)
            print(f"\n== {name} batch {b}: {total:.2f} ms GPU in {count} kernels")
            print(events.table(sort_by="self_device_time_total", row_limit=args.rows, max_name_column_width=70))


if __name__ == "__main__":
    main()
