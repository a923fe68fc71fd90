"""`qwen-tts-gateway align`: word timestamps of a recording and its transcript (Qwen3-ForcedAligner)."""
from . import DefaultsShown, add_device_args


def add_parser(sub):
    p = sub.add_parser("align", help="word timestamps of a recording and its transcript (Qwen3-ForcedAligner)",
                       formatter_class=DefaultsShown)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="Qwen3-ForcedAligner-0.6B checkpoint directory or hub repo id")
    src.add_argument("--dummy", nargs="?", const="published", choices=("published", "tiny"),
                     help="random weights of the published (default) or a tiny config")
    p.add_argument("--audio", required=True, help="WAV file (any rate; resampled to 16 kHz, mono)")
    p.add_argument("--text", required=True, help="its transcript")
    p.add_argument("--language", default="auto", help="english, chinese, japanese, korean, ... (auto: by script)")
    p.add_argument("--json", action="store_true", help='print [{"word", "start", "end"}, ...] (seconds)')
    add_device_args(p)
    return p


def run(args) -> int:
    import json

    from aligner import Aligner
    from engine.api.wav import read_wav

    audio, rate = read_wav(args.audio)
    aligner = Aligner.load(model=args.model, dummy=args.dummy, device=args.device, dtype=args.dtype,
                           graphs=False)                # one alignment: capturing the graphs would cost more
    words = aligner.align(audio, args.text, args.language, rate)
    if args.json:
        print(json.dumps([{"word": w.word, "start": w.start, "end": w.end} for w in words], ensure_ascii=False))
    else:
        for w in words:
            print(f"{w.start:8.3f} {w.end:8.3f}  {w.word}")
    return 0
