"""Official-side fixtures for parity tests: tiny random checkpoints built, saved and run with the
reference package (qwen-tts 0.1.1). Our engine loads the very same directories and must reproduce
what these helpers return.

    make_official_model_dir(variant, path, seed=0) -> Path   # a checkpoint dir the official loader accepts
    cached_model_dir(variant, seed=0) -> Path                # the same, built once per session (temp dir)
    official_generate(model_dir, variant_kind, text, ...) -> (codes (frames,16) int64, wav float32)
    official_last_prompt(model_dir) -> dict                  # prefill rows / trailing text of the last generate
    official_decode(model_dir, codes) -> wav
    official_encode(model_dir, wav24k) -> codes (frames,16)
    official_speaker_embedding(model_dir, wav24k) -> (enc_dim,)
    official_model(model_dir) -> Qwen3TTSModel               # the cached wrapper itself

Generation is greedy (do_sample=False, subtalker_dosample=False); every other setting comes from the
checkpoint's generation_config.json through the wrapper (repetition_penalty 1.05, ...).
With the tiny random weights EOS (2150) is one of 2049 allowed talker tokens and its greedy rank is
typically ~1000, so most runs go to max_new_tokens - 1 frames; some stop early on a real EOS
(seed 0: 1.7B-Base x-vector-only clone of test_reference's clip stops at 14 frames).
Helpers run with one torch thread (see `_one_thread`).
"""
import atexit
import functools
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
for _p in (str(ROOT), str(Path(__file__).parent / "stubs")):   # engine + torchaudio stand-in for qwen_tts
    if _p not in sys.path:
        sys.path.append(_p)

from engine.models.qwen3_tts.config import ASSETS  # noqa: E402
from engine.models.weights import seed_weights  # noqa: E402
from engine.models.qwen3_tts.checkpoint import tiny_codec_config, tiny_tts_config  # noqa: E402

SR = 24000
KINDS = {"custom_voice", "voice_design", "base"}


def _dump(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def _published_layout(saved: dict, want: dict, allowed: set, where: str) -> dict:
    """`save_pretrained` output -> the published layout. Checks that the official save agrees with the
    config we built from everywhere except the keys in `allowed` (dotted paths), then returns `want`."""
    def walk(a, b, prefix):
        for k in set(a) | set(b):
            path = prefix + k
            if isinstance(a.get(k), dict) and isinstance(b.get(k), dict):
                walk(a[k], b[k], path + ".")
            elif a.get(k, "<absent>") != b.get(k, "<absent>") and path not in allowed and k != "transformers_version":
                raise AssertionError(f"{where}: saved {path}={b.get(k, '<absent>')!r}, built from {a.get(k, '<absent>')!r}")
    walk(want, saved, "")
    return want


def make_official_model_dir(variant: str, path: Path, seed: int = 0) -> Path:
    """A tiny random checkpoint of `variant` made with the official classes, saved as a model dir that
    `Qwen3TTSModel.from_pretrained` loads offline. Deterministic for (variant, seed)."""
    from qwen_tts.core import Qwen3TTSTokenizerV2Config, Qwen3TTSTokenizerV2Model
    from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSForConditionalGeneration

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    published = ASSETS / "models" / variant

    # talker + predictor (+ speaker encoder for Base)
    cfg = tiny_tts_config(variant)
    model = Qwen3TTSForConditionalGeneration(Qwen3TTSConfig(**json.loads(json.dumps(cfg)))).eval()
    seed_weights(model, seed)
    model.save_pretrained(path, safe_serialization=True)
    # Trap: the official save writes `speaker_encoder_config` with "model_type": "" (plus mel_dim,
    # kernel sizes, dilations), which its own loader rejects (TypeError: unexpected keyword 'model_type');
    # for non-Base variants it writes a full default speaker_encoder_config the published files do not
    # have. It also adds "dtype". Write the published layout instead (= tiny_tts_config).
    saved = json.loads((path / "config.json").read_text())
    allowed = {"dtype", "speaker_encoder_config"} | {f"speaker_encoder_config.{k}" for k in
                                                     ("model_type", "mel_dim", "enc_kernel_sizes", "enc_dilations")}
    _dump(path / "config.json", _published_layout(saved, cfg, allowed, f"{variant}/config.json"))

    # speech tokenizer: the official loader reads <dir>/speech_tokenizer/{config.json, preprocessor_config.json,
    # model.safetensors} (cached_file("speech_tokenizer/config.json") -> Qwen3TTSTokenizer.from_pretrained(dirname))
    st = path / "speech_tokenizer"
    codec_cfg = tiny_codec_config()
    codec = Qwen3TTSTokenizerV2Model(Qwen3TTSTokenizerV2Config(**json.loads(json.dumps(codec_cfg)))).eval()
    seed_weights(codec, seed)
    codec.save_pretrained(st, safe_serialization=True)
    # The codec save likewise adds decoder_config.model_type "" and encoder_config.model_type "mimi" and "dtype".
    saved = json.loads((st / "config.json").read_text())
    allowed = {"dtype", "decoder_config.model_type", "encoder_config.model_type"}
    _dump(st / "config.json", _published_layout(saved, codec_cfg, allowed, "speech_tokenizer/config.json"))
    shutil.copyfile(published / "speech_tokenizer" / "preprocessor_config.json", st / "preprocessor_config.json")

    # generation config (overwrites the HF GenerationConfig that save_pretrained wrote), processor, text tokenizer
    for name in ("generation_config.json", "preprocessor_config.json"):
        shutil.copyfile(published / name, path / name)
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        shutil.copyfile(ASSETS / "tokenizer" / name, path / name)
    return path


def _one_thread(fn):
    """Run `fn` with one intra-op thread: the tiny models are all Python/launch overhead, and on the shared
    2-core box 2 OpenMP threads spin against other processes (measured: 40 frames 0.9 s with 1 thread,
    7-15 s with 2 under load). Restores the caller's setting."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        old = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with torch.no_grad():
                return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(old)
    return run


_TMP_ROOT = None
_DIRS: dict = {}


def cached_model_dir(variant: str, seed: int = 0) -> Path:
    """`make_official_model_dir` once per (variant, seed) per session, in a temp dir removed at exit."""
    global _TMP_ROOT
    key = (variant, seed)
    if key not in _DIRS:
        if _TMP_ROOT is None:
            _TMP_ROOT = Path(tempfile.mkdtemp(prefix="qwen3tts-official-"))
            atexit.register(shutil.rmtree, _TMP_ROOT, True)
        _DIRS[key] = make_official_model_dir(variant, _TMP_ROOT / f"{variant}-s{seed}", seed)
    return _DIRS[key]


_MODELS: dict = {}


def official_model(model_dir):
    """The official wrapper for `model_dir`, loaded once. `model.generate` and `talker.generate` are wrapped
    to record the generated codes and the prompt of the last call (see `official_last_prompt`)."""
    key = str(Path(model_dir).resolve())
    if key not in _MODELS:
        from qwen_tts.inference.qwen3_tts_model import Qwen3TTSModel

        w = Qwen3TTSModel.from_pretrained(key)
        w.model.eval()
        w.last = {}
        generate, talker_generate = w.model.generate, w.model.talker.generate

        def recording_generate(*args, **kwargs):
            codes, hidden = generate(*args, **kwargs)
            w.last["codes"] = [c.detach().cpu().clone() for c in codes]
            return codes, hidden

        def recording_talker_generate(*args, **kwargs):
            w.last.update(prefill=kwargs["inputs_embeds"].detach().cpu().clone(),
                          attention_mask=kwargs["attention_mask"].detach().cpu().clone(),
                          trailing=kwargs["trailing_text_hidden"].detach().cpu().clone())
            return talker_generate(*args, **kwargs)

        w.model.generate = recording_generate
        w.model.talker.generate = recording_talker_generate
        _MODELS[key] = w
    return _MODELS[key]


def _kind(w, variant_kind: str) -> str:
    kind = variant_kind if variant_kind in KINDS else json.loads(
        (ASSETS / "models" / variant_kind / "config.json").read_text())["tts_model_type"]
    if kind != w.model.tts_model_type:
        raise ValueError(f"{variant_kind!r} asked of a {w.model.tts_model_type} checkpoint")
    return kind


@_one_thread
def official_generate(model_dir, variant_kind: str, text: str, *, speaker=None, language="auto", instruct=None,
                      ref_audio=None, ref_text=None, x_vector_only=False, non_streaming=False, max_new_tokens=40):
    """Greedy generation through the official wrapper. `variant_kind`: custom_voice | voice_design | base
    (or a variant name). `ref_audio`: float 24 kHz mono array. `non_streaming` None: the function's own default.
    Returns (codes, wav): the codes that `model.generate` returned (for ICL the generated frames only, without the
    reference codes) as int64 (frames, 16), and the waveform exactly as the wrapper returns it (ICL: reference part
    cut off)."""
    w = official_model(model_dir)
    kind = _kind(w, variant_kind)
    kw = dict(language=language, max_new_tokens=max_new_tokens, do_sample=False, subtalker_dosample=False)
    if non_streaming is not None:                  # None: the generate_* function's own default
        kw["non_streaming_mode"] = non_streaming
    w.last.clear()
    if kind == "custom_voice":
        wavs, sr = w.generate_custom_voice(text, speaker=speaker, instruct=instruct, **kw)
    elif kind == "voice_design":
        wavs, sr = w.generate_voice_design(text, instruct=instruct, **kw)
    else:
        audio = (np.asarray(ref_audio, dtype=np.float32), SR)
        wavs, sr = w.generate_voice_clone(text, ref_audio=audio, ref_text=ref_text,
                                          x_vector_only_mode=x_vector_only, **kw)
    assert sr == SR
    codes = w.last["codes"][0].numpy().astype(np.int64)
    return codes, np.asarray(wavs[0], dtype=np.float32)


def official_last_prompt(model_dir) -> dict:
    """What the last `official_generate` on `model_dir` fed the talker: `prefill` (T, H) prompt rows,
    `trailing` (L, H) trailing text rows (one per decode step, then tts_pad), float32 numpy."""
    last = official_model(model_dir).last
    return {"prefill": last["prefill"][0].float().numpy(), "trailing": last["trailing"][0].float().numpy()}


@_one_thread
def official_decode(model_dir, codes) -> np.ndarray:
    """codes (frames, 16) -> 24 kHz float32 waveform via the official speech tokenizer (chunked decode)."""
    w = official_model(model_dir)
    wavs, sr = w.model.speech_tokenizer.decode([{"audio_codes": torch.as_tensor(np.asarray(codes), dtype=torch.long)}])
    return np.asarray(wavs[0], dtype=np.float32)


@_one_thread
def official_encode(model_dir, wav24k) -> np.ndarray:
    """24 kHz float waveform -> codes (frames, 16) int64 via the official speech tokenizer encoder."""
    w = official_model(model_dir)
    enc = w.model.speech_tokenizer.encode(np.asarray(wav24k, dtype=np.float32), sr=SR)
    return enc.audio_codes[0].cpu().numpy().astype(np.int64)


@_one_thread
def official_speaker_embedding(model_dir, wav24k) -> np.ndarray:
    """24 kHz float waveform -> x-vector (enc_dim,) via the official speaker encoder (Base only)."""
    w = official_model(model_dir)
    emb = w.model.extract_speaker_embedding(np.asarray(wav24k, dtype=np.float32), SR)
    return emb.float().cpu().numpy()
