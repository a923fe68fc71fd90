"""The OFFICIAL qwen-tts (0.1.1) on the very random weights of our `--dummy VARIANT`, for ratios against our engine.

The official classes are built from our shipped configs on the target device, seeded with engine.models.weights.seed_weights
exactly as engine.models.qwen3_tts.model.load_model seeds ours (talker + speaker encoder: seed; speech tokenizer: seed + 1), then cast
with `.to(device, dtype)`. One wrapper call per batch (the official code returns audio only at the end of the call).
Needs qwen-tts with transformers 4.57.x (GPU: the carried wheels on PYTHONPATH; CPU: tests/stubs for torchaudio).

python bench/official_bench.py --variant 1.7B-CustomVoice --batch 1 16 64 --frames 100 --json official.json"""
import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workload import workload  # noqa: E402
from engine.models.qwen3_tts.config import ASSETS  # noqa: E402
from engine.models.weights import seed_weights  # noqa: E402
from engine.models.weights import default_device_dtype  # noqa: E402
from engine.models.qwen3_tts.checkpoint import dummy_configs  # noqa: E402

SR = 24000


def build_official(variant: str, device, dtype, seed: int, attn: str):
    """Qwen3TTSModel (the official wrapper) around seeded official modules, assembled as its from_pretrained does."""
    from transformers import AutoConfig, AutoFeatureExtractor, AutoProcessor
    from qwen_tts.core import Qwen3TTSTokenizerV2Config, Qwen3TTSTokenizerV2Model
    from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSForConditionalGeneration, Qwen3TTSProcessor
    from qwen_tts.inference.qwen3_tts_model import Qwen3TTSModel
    from qwen_tts.inference.qwen3_tts_tokenizer import Qwen3TTSTokenizer

    cfg, codec_cfg, gen_cfg = dummy_configs(variant)             # the very configs our engine builds from
    published = ASSETS / "models" / ((variant[5:] or "1.7B-CustomVoice") if variant.startswith("tiny") else variant)
    config = Qwen3TTSConfig(**json.loads(json.dumps(cfg)))
    config._attn_implementation = attn                           # recurses into talker and code predictor configs
    with torch.device(device):                                   # fp32 on the device, as load_model builds ours
        model = Qwen3TTSForConditionalGeneration(config)
        codec = Qwen3TTSTokenizerV2Model(Qwen3TTSTokenizerV2Config(**json.loads(json.dumps(codec_cfg))))
    seed_weights(model, seed)
    seed_weights(codec, seed + 1)
    model, codec = model.to(device, dtype).eval(), codec.to(device, dtype).eval()

    speech_tokenizer = Qwen3TTSTokenizer()                       # what Qwen3TTSTokenizer.from_pretrained fills in
    speech_tokenizer.feature_extractor = AutoFeatureExtractor.from_pretrained(published / "speech_tokenizer")
    speech_tokenizer.model, speech_tokenizer.config, speech_tokenizer.device = codec, codec.config, codec.device
    model.load_speech_tokenizer(speech_tokenizer)
    model.load_generate_config(gen_cfg)

    AutoConfig.register("qwen3_tts", Qwen3TTSConfig, exist_ok=True)
    AutoProcessor.register(Qwen3TTSConfig, Qwen3TTSProcessor, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="official-processor-"))   # laid out like a checkpoint directory
    try:
        (tmp / "config.json").write_text(json.dumps(cfg))
        shutil.copyfile(published / "preprocessor_config.json", tmp / "preprocessor_config.json")
        for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
            shutil.copyfile(ASSETS / "tokenizer" / name, tmp / name)
        processor = AutoProcessor.from_pretrained(str(tmp), fix_mistral_regex=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Qwen3TTSModel(model=model, processor=processor, generate_defaults=gen_cfg)


def same_weights(ours: torch.nn.Module, theirs: torch.nn.Module) -> tuple[bool, str]:
    a, b = ours.state_dict(), theirs.state_dict()
    equal = [k for k in a.keys() & b.keys() if torch.equal(a[k].float(), b[k].float())]
    return a.keys() == b.keys() and len(equal) == len(b), f"{len(equal)}/{len(b)} tensors equal"


def synthesize(tts, texts: list[str], frames: int, streaming_text: bool):
    """The variant's official generate method with the checkpoint's default sampling."""
    kw = dict(max_new_tokens=frames + 1, non_streaming_mode=not streaming_text)   # N + 1 tokens -> N frames
    kind = tts.model.tts_model_type
    if kind == "custom_voice":
        return tts.generate_custom_voice(texts, speaker=list(tts.model.get_supported_speakers())[0], **kw)
    if kind == "voice_design":
        return tts.generate_voice_design(texts, instruct="A calm, friendly young voice.", **kw)
    ref = (0.1 * np.random.default_rng(0).standard_normal(3 * SR)).astype(np.float32)   # x-vector-only clone
    return tts.generate_voice_clone(texts, ref_audio=(ref, SR), x_vector_only_mode=True, **kw)


def measure(tts, batches, frames: int, max_chars: int, streaming_text: bool, seed: int = 0) -> list[dict]:
    """One official call per batch size: wall time, its split into generate | decode, RTF, audio-s/s."""
    cuda = tts.device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    generate, timing = tts.model.generate, {}

    def timed_generate(*a, **kw):                                # split the call: talker+predictor | codec decode
        codes, hidden = generate(*a, **kw)
        sync()
        timing.update(gen_end=time.perf_counter(), frames=[len(c) for c in codes])
        return codes, hidden
    tts.model.generate = timed_generate
    torch.manual_seed(seed)
    synthesize(tts, [t for t, _ in workload(2, seed=99, max_chars=60)], min(frames, 4), streaming_text)
    device_name = torch.cuda.get_device_name() if cuda else "cpu"
    rows = []
    for b in batches:
        texts = [t for t, _ in workload(b, seed=b, max_chars=max_chars)]
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        torch.manual_seed(seed + b)
        sync()
        t0 = time.perf_counter()
        wavs, sr = synthesize(tts, texts, frames, streaming_text)
        sync()
        wall = time.perf_counter() - t0
        assert sr == SR and len(wavs) == b
        audio, gen = sum(len(w) for w in wavs) / SR, timing["gen_end"] - t0
        steps = max(timing["frames"])                            # the batch steps until its longest stream ends
        r = dict(device=device_name, model=f"official qwen-tts {tts.model.tts_model_type}", batch=b,
                 frames_per_stream=frames, frames=sum(timing["frames"]), steps=steps, wall_s=wall, generate_s=gen,
                 decode_s=wall - gen, audio_s=audio, rtf=wall / (audio / b), audio_s_per_s=audio / wall,
                 ms_per_step=1000 * wall / steps, first_audio_ms=1000 * wall,
                 gpu_mem_gib=torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0)
        rows.append(r)
        print(f"official b={b:4d} wall {wall:8.2f} s (gen {gen:7.2f} + decode {wall - gen:6.2f}) | frames "
              f"{r['frames']:6d} ({steps} steps) | audio {audio:8.1f} s | rtf {r['rtf']:.3f} | "
              f"{r['audio_s_per_s']:7.1f} audio-s/s | {r['ms_per_step']:7.1f} ms/step | "
              f"first audio {1000 * wall:8.0f} ms | {r['gpu_mem_gib']:.1f} GiB", flush=True)
    tts.model.generate = generate
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--variant", default="1.7B-CustomVoice", help="a published variant, tiny or tiny-<variant>")
    p.add_argument("--batch", type=int, nargs="+", default=[1, 16, 64])
    p.add_argument("--frames", type=int, default=100, help="frames per stream (max_new_tokens = frames + 1)")
    p.add_argument("--max-chars", type=int, default=125, help="workload texts of 20..max-chars characters")
    p.add_argument("--streaming-text", action="store_true", help="non_streaming_mode=False (our engine's layout)")
    p.add_argument("--attn", default="sdpa", choices=["sdpa", "eager", "flash_attention_2"])
    p.add_argument("--device")
    p.add_argument("--dtype")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check-weights", action="store_true", help="also build our engine's model and compare")
    p.add_argument("--json")
    args = p.parse_args()
    device, dtype = default_device_dtype(args.device, args.dtype)
    t0 = time.perf_counter()
    tts = build_official(args.variant, device, dtype, args.seed, args.attn)
    print(f"built official {tts.model.tts_model_type} dummy:{args.variant} on {device} {dtype} in "
          f"{time.perf_counter() - t0:.1f}s", flush=True)
    if args.check_weights:
        from engine.models.qwen3_tts.model import load_model
        ours = load_model(dummy=args.variant, device=device, dtype=dtype, seed=args.seed)
        tts_ok, tts_msg = same_weights(ours.tts, tts.model)
        codec_ok, codec_msg = same_weights(ours.codec, tts.model.speech_tokenizer.model)
        print(f"weights identical to engine dummy: {tts_ok and codec_ok}")
        print(f"  model {tts_msg}, speech tokenizer {codec_msg}", flush=True)
        del ours
    rows = measure(tts, args.batch, args.frames, args.max_chars, args.streaming_text, args.seed)
    for r in rows:
        r.update(dtype=str(dtype), attn=args.attn, model=f"{r['model']} dummy:{args.variant}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
