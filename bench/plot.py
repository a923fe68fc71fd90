"""TTFA and streaming viability against concurrency, from engine_bench JSON files.

python bench/plot.py bench/results/h100-1.7B-CustomVoice.json bench/results/h200-1.7B-CustomVoice.json --out bench/results/concurrency.png"""
import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("files", nargs="+")
    p.add_argument("--out", default="concurrency.png")
    args = p.parse_args()
    fig, (ax_ttfa, ax_viable) = plt.subplots(1, 2, figsize=(10, 4))
    for f in args.files:
        by_level = {r["concurrency"]: r for r in json.loads(Path(f).read_text()) if "concurrency" in r}
        rows = [by_level[c] for c in sorted(by_level)]          # a repeated level: its last (warm) run
        label = f"{rows[0]['model'].removeprefix('dummy:')} ({rows[0]['device'].removeprefix('NVIDIA ')})"
        c = [r["concurrency"] for r in rows]
        ax_ttfa.plot(c, [r["ttfa_p50_ms"] for r in rows], "o-", label=f"{label} p50")
        ax_ttfa.plot(c, [r["ttfa_p90_ms"] for r in rows], "x--", label=f"{label} p90")
        ax_viable.plot(c, [100 * r["viability"] for r in rows], "o-", label=label)
    for ax in (ax_ttfa, ax_viable):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent streams")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax_ttfa.set_ylabel("time to first audio (ms)")
    ax_ttfa.set_yscale("log")
    ax_viable.set_ylabel("streaming viability (%)")
    ax_viable.set_ylim(-5, 105)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
