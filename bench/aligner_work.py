"""The forced aligner's work per second of produced audio under the gateway's job flow (bench/aligner_flow.py),
counted on the CPU exactly: audio aligned, encoder chunk slots run (and the mel frames they hold), encoder and text
tokens run (and those of a job), forwards and slices, each batch packed by the real planner (aligner/layout.py) with
the published config and tokenizer; and an estimate of the H100's device ms from these counts, at the per-stage
costs of one 64 x 4 s forward measured on it (3a1e426: GEMMs and attention ~16 ms, the conv front end ~10 ms, the
rest ~10 ms). A batch takes its estimated device time / `share` (the device share the aligner gets at that load),
at least TURNS turns between the engine's steps (a step a frame, at `rtf`).

python3 bench/aligner_work.py [--texts en4x15 en3x20 zh] [--levels 256 512 1024] [--json out.json]
    [--concurrent EFF] [--guard S] [--opening-audio S] [--rtf R ...]    (what-ifs of the flow)"""
import argparse
import functools
import json
import sys
import types
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aligner import stream  # noqa: E402
from aligner.align import input_ids  # noqa: E402
from aligner.device_costs import TURNS  # noqa: E402
from aligner.audio_encoder import CHUNK, SLOTS, TOKENS, audio_tokens  # noqa: E402
from aligner.config import PUBLISHED, AlignerConfig, published_config  # noqa: E402
from aligner.features import mel_shape  # noqa: E402
from aligner.forward import conv_gflop, gflop  # noqa: E402
from aligner.layout import largest_first, plan  # noqa: E402
from aligner.model import AlignerModel, cuts  # noqa: E402
from bench.aligner_flow import PACES, RATE, Flow  # noqa: E402
from bench.workload import WORDS  # noqa: E402
from engine.models.qwen3_tts.text_tokenizer import TextTokenizer  # noqa: E402

H100_MS = dict(gemm=16.0, conv=10.0, rest=10.0)     # one 64 x 4 s forward's kernels (3a1e426)
CONCURRENT_TURNS = 0.05    # beside the steps a batch waits no turn, only its launch (~4 ms at RTF 0.5)
LEVELS = [(256, 0.42, 0.5), (512, 0.55, 0.35), (1024, 0.73, 0.2)]   # contexts, RTF p50 and the aligner's share (H100)


class Work:
    """Counts every batch it is given, as the aligner would run it."""

    def __init__(self):
        self.cfg = AlignerConfig.from_dict(published_config())
        a, t = self.cfg.audio, self.cfg.text
        self.model = types.SimpleNamespace(cfg=self.cfg, encoder=[None] * AlignerModel.ENCODER_SLICES,
                                           text=[None] * AlignerModel.TEXT_SLICES,
                                           encoder_layers=cuts(a.layers, AlignerModel.ENCODER_SLICES),
                                           text_layers=cuts(t.num_layers, AlignerModel.TEXT_SLICES))
        self.unit_ids = functools.lru_cache(maxsize=1 << 16)(TextTokenizer.load(PUBLISHED).encode)
        self.counts = Counter()

    def batch(self, items: list[tuple[np.ndarray, list[str]]]) -> Counter:
        items = [items[i] for i in largest_first(list(range(len(items))), [len(a) for a, _ in items])]
        frames, width = mel_shape([len(audio) for audio, _ in items], RATE)
        ids = [input_ids(self.cfg, self.unit_ids, audio_tokens(f), units) for f, (_, units) in zip(frames, items)]
        c = Counter(forwards=1, jobs=len(items), aligned_s=sum(len(audio) for audio, _ in items) / RATE)
        stages = len(self.model.encoder) + len(self.model.text)
        for _, _, lay in plan(frames, width, ids, self.cfg.audio_token, self.cfg.timestamp_token):
            rows, (text_rows, text_width) = len(lay.windows), lay.ids.shape
            c.update(slices=stages, slots=rows * SLOTS, slots_used=int((lay.conv_frames > 0).sum()),
                     mel_frames=int((lay.mel_frames >= 0).sum()), encoder_tokens=rows * TOKENS,
                     encoder_tokens_used=int((lay.windows >= 0).sum()), text_tokens=text_rows * text_width,
                     text_tokens_used=int((lay.sequences >= 0).sum()))
            total = sum(gflop(self.model, lay, s) for s in range(stages))
            c.update(gflop=total - rows * SLOTS * conv_gflop(self.cfg.audio))
        self.counts.update(c)
        return c


@functools.lru_cache(maxsize=1)
def unit_costs() -> dict[str, float]:
    """H100 ms per conv slot, per GFLOP of the GEMMs and attention, and per token run (the small kernels)."""
    rng, work = np.random.default_rng(0), Work()
    c = work.batch([(np.zeros(4 * RATE, np.float32), list(rng.choice(WORDS, 10))) for _ in range(64)])
    return dict(conv=H100_MS["conv"] / c["slots"], gemm=H100_MS["gemm"] / c["gflop"],
                rest=H100_MS["rest"] / (c["encoder_tokens"] + c["text_tokens"]))


def device_ms(c: Counter) -> float:
    """Estimated H100 device ms of the work counted in `c`."""
    u = unit_costs()
    return c["slots"] * u["conv"] + c["gflop"] * u["gemm"] + (c["encoder_tokens"] + c["text_tokens"]) * u["rest"]


def level(texts: str, concurrency: int, duration: float, rtf: float, share: float, seed: int = 0,
          stream_options: dict | None = None, swing: float = 0.0, turns: float = TURNS) -> dict:
    work = Work()
    forward_s = lambda items: max(turns * 0.08 * rtf, device_ms(work.batch(items)) / 1000 / share)
    flow = Flow(PACES[texts], concurrency, duration, forward_s, rtf=rtf, seed=seed, stream_options=stream_options,
                swing=swing).run()
    c, audio_s = work.counts, sum(ctx.frames for ctx in flow.contexts) * 1920 / RATE
    leads = np.array([lead for ctx in flow.contexts for lead in ctx.leads])
    words = sum(len(ctx.truth) for ctx in flow.contexts)
    per = lambda k: c[k] / audio_s
    return dict(texts=texts, concurrency=concurrency, rtf=rtf, share=share, contexts=len(flow.contexts),
                audio_s=audio_s, words=words, words_settled=len(leads),
                spoken_left_out=sum(ctx.left_out for ctx in flow.contexts), aligned_per_audio_s=per("aligned_s"),
                jobs_per_audio_s=per("jobs"), forwards_per_audio_s=per("forwards"), slices_per_audio_s=per("slices"),
                slots_per_audio_s=per("slots"), slot_fill=c["mel_frames"] / max(1, c["slots"] * CHUNK),
                slots_used=c["slots_used"] / max(1, c["slots"]),
                encoder_tokens_per_audio_s=per("encoder_tokens"),
                encoder_token_fill=c["encoder_tokens_used"] / max(1, c["encoder_tokens"]),
                text_tokens_per_audio_s=per("text_tokens"),
                text_token_fill=c["text_tokens_used"] / max(1, c["text_tokens"]),
                gflop_per_audio_s=per("gflop"), est_h100_device_ms_per_audio_s=device_ms(c) / audio_s,
                lead_p1_s=float(np.percentile(leads, 1)), lead_min_s=float(leads.min()),
                late=float((leads < 0).mean()), lead_p50_s=float(np.percentile(leads, 50)))


def line(r: dict) -> str:
    return " | ".join([
        f"{r['texts']:7s} c={r['concurrency']:4d} rtf {r['rtf']:.2f}",
        f"aligned {r['aligned_per_audio_s']:.3f}x, {r['jobs_per_audio_s']:.2f} jobs, "
        f"{r['forwards_per_audio_s']:.3f} forwards, {r['slices_per_audio_s']:.2f} slices",
        f"encoder {r['slots_per_audio_s']:.2f} slots (fill {r['slot_fill']:.1%}, used {r['slots_used']:.1%}), "
        f"{r['encoder_tokens_per_audio_s']:.1f} tokens ({r['encoder_token_fill']:.1%})",
        f"text {r['text_tokens_per_audio_s']:.1f} tokens ({r['text_token_fill']:.1%})",
        f"{r['gflop_per_audio_s']:.1f} GFLOP", f"est. H100 {r['est_h100_device_ms_per_audio_s']:.3f} ms",
        f"words lead p50 {r['lead_p50_s']:.2f} p1 {r['lead_p1_s']:.2f} min {r['lead_min_s']:.2f} s, late "
        f"{r['late']:.2%} ({r['words_settled']}/{r['words']}, {r['spoken_left_out']} spoken left out)",
        "per produced audio-s"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--texts", nargs="+", default=["en4x15", "en3x20", "zh"], choices=sorted(PACES))
    p.add_argument("--levels", type=int, nargs="+", default=[c for c, _, _ in LEVELS], help="contexts: 256 512 1024")
    p.add_argument("--duration", type=float, default=20.0, help="contexts start in this window (s)")
    p.add_argument("--swing", type=float, default=0.0, help="the speaker's pace goes up and down by this share")
    p.add_argument("--concurrent", type=float, metavar="EFF", help="the aligner beside the steps on its own stream, "
                   "not in turns: it gets EFF of the device the step leaves idle, (1 - rtf) x EFF, and waits no turn "
                   "(the model leaves the step's own time as it is: on an H200 it grew by ~4x the aligner's)")
    p.add_argument("--guard", type=float, default=stream.GUARD, help="aligner/stream.py's GUARD (s; at 0 units the "
                   "audio has not reached, crammed at the window's end, settle: not a setting to read as real)")
    p.add_argument("--opening-audio", type=float, help="WordStream's opening_audio (s; default: its own)")
    p.add_argument("--rtf", type=float, nargs="+", help="each level's RTF (default: the H100's, LEVELS)")
    p.add_argument("--json")
    args = p.parse_args()
    stream.GUARD, rows = args.guard, []
    levels = [x for x in LEVELS if x[0] in args.levels]
    rtfs = args.rtf or [rtf for _, rtf, _ in levels]
    for texts in args.texts:
        for (c, _, share), rtf in zip(levels, rtfs):
            if args.concurrent is not None:
                share = (1 - rtf) * args.concurrent
            rows.append(level(texts, c, args.duration, rtf, share, swing=args.swing,
                              stream_options={} if args.opening_audio is None else
                              dict(opening_audio=args.opening_audio),
                              turns=TURNS if args.concurrent is None else CONCURRENT_TURNS))
            print(line(rows[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(dict(unit_costs_ms=unit_costs(), levels=rows), indent=1))


if __name__ == "__main__":
    main()
