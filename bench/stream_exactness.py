"""Streamed text against the whole text's tokenization, on the CPU: sentences in each language sent 1-2 characters
(Chinese, Japanese, Korean) or a word at a time (`--pieces tokens`: a Qwen LLM's tokens) through the engine's
intake. Reports the share whose fed ids equal the whole text's, that every difference re-segments the same
characters, and the characters and pieces sent when the first text id settled (the engine's start), with the time
since the first piece at load_bench's pace."""
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


def stream(intake: TextIntake, parts: list[str]) -> tuple[list[int], int | None, int | None]:
    """The ids fed for `parts` sent one at a time, and the characters and pieces sent when the first text id settled
    (None: only at the end)."""
    seq = Sequence(0, SynthesisRequest(text_complete=False), None, 0, ROLE, AUDIO)
    intake.add(seq)
    sent, start, pieces_sent = 0, None, None
    for n, part in enumerate(parts, 1):
        intake.add(seq, part)
        intake.settle()
        sent += len(part)
        if start is None and seq.text.feed:
            start, pieces_sent = sent, n
    intake.add(seq, closed=True)
    intake.settle()
    return seq.text.role_ids + seq.text.feed, start, pieces_sent


def measure(tokenizer, lang: str, n: int, seed: int, piece_ms: tuple[float, float], how: str = "chars") -> dict:
    intake, rng, clock = TextIntake(tokenizer, ROLE), random.Random(seed), random.Random(seed + 1)
    exact, starts, pieces_at, waits, differ = 0, [], [], [], []
    for text in sentences(lang, n, seed):
        parts = pieces(text, lang, rng, how)
        ids, start, pieces_sent = stream(intake, parts)
        pieces_at.append(pieces_sent or len(parts))
        waits.append(sum(clock.uniform(*piece_ms) for _ in range(pieces_at[-1] - 1)))
        whole = tokenizer.encode_prompt(ROLE, text)
        assert tokenizer.decode(ids) == tokenizer.decode(whole), text       # the same characters, whatever the split
        exact += ids == whole
        starts.append(start or len(text))
        if ids != whole and len(differ) < 5:
            differ.append(dict(text=text, streamed=[tokenizer.decode([i]) for i in ids[3:]],
                               whole=[tokenizer.decode([i]) for i in whole[3:]]))
    row = dict(sentences=len(starts), exact_share=round(exact / len(starts), 4), start_chars_max=max(starts))
    for name, values in ("start_chars", starts), ("start_pieces", pieces_at), ("start_ms", waits):
        row.update({f"{name}_p{q}": round(sorted(values)[len(values) * q // 100]) for q in (50, 90)})
    return dict(row, differences=differ)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--languages", nargs="+", choices=list(LANGUAGES), default=["zh", "ja", "ko", "en"])
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--piece-ms", type=float, nargs=2, default=[20.0, 30.0], help="ms between pieces, as load_bench's")
    ap.add_argument("--pieces", choices=("chars", "tokens"), default="chars", help="as load_bench's --pieces")
    ap.add_argument("--out", help="write the report here as JSON")
    args = ap.parse_args(argv)
    tokenizer = TextTokenizer.load()
    report = {lang: measure(tokenizer, lang, args.sentences, args.seed, args.piece_ms, args.pieces)
              for lang in args.languages}
    for lang, row in report.items():
        print(f"{lang}: {row['sentences']} sentences, exact {row['exact_share']:.2%}, first id after "
              f"{row['start_chars_p50']} / {row['start_chars_p90']} / {row['start_chars_max']} characters "
              f"(p50 / p90 / max), {row['start_pieces_p50']} / {row['start_pieces_p90']} pieces, "
              f"{row['start_ms_p50']} / {row['start_ms_p90']} ms after the first piece")
    if args.out:
        Path(args.out).write_text(json.dumps(report, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
