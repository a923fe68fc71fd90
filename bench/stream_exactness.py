"""Streamed text against the whole text's tokenization, on the CPU: sentences in each language sent 1-2 characters
(Chinese, Japanese) or a word at a time through the engine's text intake. Reports the share whose fed ids equal the
whole text's, that every difference re-segments the same characters, and how many characters were sent before the
first text id settled (the engine's start)."""
import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.languages import LANGUAGES, pieces, sentences  # noqa: E402
from engine.api.request import SynthesisRequest  # noqa: E402
from engine.core.sequence import Sequence  # noqa: E402
from engine.core.text_intake import TextIntake  # noqa: E402
from engine.models.base import AudioFormat  # noqa: E402
from engine.models.qwen3_tts.requests import ROLE  # noqa: E402
from engine.models.qwen3_tts.text_tokenizer import TextTokenizer  # noqa: E402


AUDIO = AudioFormat(num_codebooks=16, samples_per_frame=1920, sample_rate=24000)

def stream(intake: TextIntake, parts: list[str]) -> tuple[list[int], int | None]:
    """The ids fed for `parts` sent one at a time, and the characters sent when the first text id settled."""
    seq = Sequence(0, SynthesisRequest(text_complete=False), None, 0, ROLE, AUDIO)
    intake.add(seq)
    sent, start = 0, None
    for part in parts:
        intake.add(seq, part)
        intake.settle()
        sent += len(part)
        if start is None and seq.text.feed:
            start = sent
    intake.add(seq, closed=True)
    intake.settle()
    return seq.text.role_ids + seq.text.feed, start


def measure(tokenizer, lang: str, n: int, seed: int) -> dict:
    intake, rng = TextIntake(tokenizer, ROLE), random.Random(seed)
    exact, starts, differ = 0, [], []
    for text in sentences(lang, n, seed):
        ids, start = stream(intake, pieces(text, lang, rng))
        whole = tokenizer.encode_prompt(ROLE, text)
        assert tokenizer.decode(ids) == tokenizer.decode(whole), text       # the same characters, whatever the split
        exact += ids == whole
        starts.append(start)
        if ids != whole and len(differ) < 5:
            differ.append(dict(text=text, streamed=[tokenizer.decode([i]) for i in ids[3:]],
                               whole=[tokenizer.decode([i]) for i in whole[3:]]))
    starts.sort()
    return dict(sentences=len(starts), exact_share=round(exact / len(starts), 4),
                start_chars_p50=starts[len(starts) // 2], start_chars_p90=starts[len(starts) * 9 // 10], start_chars_max=starts[-1], differences=differ)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--languages", nargs="+", choices=list(LANGUAGES), default=["zh", "ja"])
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="write the report here as JSON")
    args = ap.parse_args(argv)
    tokenizer = TextTokenizer.load()
    report = {lang: measure(tokenizer, lang, args.sentences, args.seed) for lang in args.languages}
    for lang, row in report.items():
        print(f"{lang}: {row['sentences']} sentences, exact {row['exact_share']:.2%}, first id after "
              f"{row['start_chars_p50']} characters (p50), {row['start_chars_p90']} (p90), "
              f"{row['start_chars_max']} (max)")
    if args.out:
        Path(args.out).write_text(json.dumps(report, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
