"""The engine thread's cost to settle waiting contexts' text each step (a diagnostic on the CPU): N contexts, each
getting 4 pieces of 4 characters a 64 ms step (4 characters every 15 ms), TextIntake.settle timed alone.

python3 bench/settle_bench.py --contexts 100 500"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.stream_exactness import AUDIO  # noqa: E402
from engine.api.request import SynthesisRequest  # noqa: E402
from engine.core.sequence import Sequence, Status  # noqa: E402
from engine.core.text_intake import TextIntake  # noqa: E402
from engine.models.qwen3_tts.requests import ROLE  # noqa: E402
from engine.models.qwen3_tts.text_tokenizer import TextTokenizer  # noqa: E402

TEXT = "The quick brown fox jumps over the lazy dog while the agent keeps talking about the weather today. " * 3


def settle_ms(intake: TextIntake, contexts: int, steps: int) -> float:
    seqs = [Sequence(i, SynthesisRequest(text_complete=False), None, 0, ROLE, AUDIO) for i in range(contexts)]
    for s in seqs:
        intake.add(s)
    intake.settle()
    spent = 0.0
    for k in range(steps):
        for s in seqs:
            for j in range(4):
                at = (k * 4 + j) * 4 % 250
                intake.add(s, TEXT[at:at + 4])
        t0 = time.perf_counter()
        intake.settle()
        spent += time.perf_counter() - t0
    for s in seqs:
        s.status = Status.FINISHED
    intake.settle()
    return 1000 * spent / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--contexts", type=int, nargs="+", default=[100, 500])
    p.add_argument("--steps", type=int, default=40)
    args = p.parse_args()
    intake = TextIntake(TextTokenizer.load(), ROLE)
    for n in args.contexts:
        ms = settle_ms(intake, n, args.steps)
        print(f"{n} contexts: settle {ms:.2f} ms a step, {1000 * ms / n:.1f} us a context")


if __name__ == "__main__":
    main()
