"""Where each thread of a process spent its sampled time, from `py-spy record --format raw --threads` files (as
bench/gpu_gateway.sh writes them): samples per thread (py-spy leaves idle ones out) and the lines they were in.

python3 bench/pyspy_summary.py bench/results/.../profile-*.txt"""
import re
import sys
from collections import Counter, defaultdict


def summarize(path: str, top: int = 6) -> list[str]:
    threads, leaves = Counter(), defaultdict(Counter)
    for line in open(path):
        if not line.strip():
            continue
        stack, count = line.rstrip().rsplit(" ", 1)
        thread, *frames = stack.split(";")
        threads[thread] += int(count)
        leaf = re.sub(r" \((?:.*/)?([^/:]+):(\d+)\)", r" (\1:\2)", frames[-1] if frames else "?")
        leaves[thread][leaf] += int(count)
    lines = [f"== {path.rsplit('/', 1)[-1]}: {sum(threads.values())} samples"]
    for thread, n in threads.most_common(top):
        lines.append(f"  {n:6d} {thread}")
        lines += [f"      {m:6d} {leaf[:110]}" for leaf, m in leaves[thread].most_common(top)]
    return lines


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print("\n".join(summarize(path)))
