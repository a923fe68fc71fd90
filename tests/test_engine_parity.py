"""Parity with the official qwen-tts code: identical greedy codec frames and matching waveforms.

Both sides load the same directory, saved by the official classes with seeded random weights."""
import inspect
from types import SimpleNamespace

import numpy as np
import pytest

from helpers import assert_audio_close

from engine import Engine, SamplingParams, SynthesisRequest, VoiceRef
from engine.api.validate import Validator
from engine.models.qwen3_tts.config import TTSConfig
from reference import SR, cached_model_dir, official_generate

pytestmark = pytest.mark.slow                # parity with qwen-tts

MAX_NEW_TOKENS = 24            # the reference yields at most MAX_NEW_TOKENS - 1 frames
TEXT = "Hello there, iPhone owners! It's 3:45pm and McDonald's is open."

_ENGINES: dict = {}


def engine_for(variant: str) -> Engine:
    if variant not in _ENGINES:
        _ENGINES[variant] = Engine.load(model=str(cached_model_dir(variant)), device="cpu", dtype="float32",
                                        max_active=8).start()
    return _ENGINES[variant]


def reference_clip(seconds: float = 1.6, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    return (0.3 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 1.3 * t)
            + 0.05 * rng.standard_normal(t.shape)).astype(np.float32)


def ours(variant: str, **kw):
    chunks = list(engine_for(variant).submit(SynthesisRequest(
        sampling=SamplingParams.greedy(), max_frames=MAX_NEW_TOKENS - 1, **kw)).iter_blocking())
    return np.concatenate([c.codes for c in chunks]), np.concatenate([c.pcm for c in chunks]), chunks


CASES = [
    ("1.7B-CustomVoice", dict(speaker="vivian", language="english")),
    ("1.7B-CustomVoice", dict(speaker="ryan", language="english", instruct="Speak slowly, in a whisper.")),
    ("1.7B-CustomVoice", dict(speaker="eric", language="auto")),                 # dialect speaker under auto
    ("0.6B-CustomVoice", dict(speaker="aiden", language="chinese")),             # identity predictor projection
    ("1.7B-VoiceDesign", dict(language="auto", instruct="A deep, calm male voice with a slight rasp.")),
    ("1.7B-Base", dict(language="english", ref_text="This is the reference transcript.")),   # ICL clone
    ("0.6B-Base", dict(language="english", x_vector_only=True)),
]


@pytest.mark.parametrize("non_streaming", [False, True, None],
                         ids=["streaming-text", "non-streaming-text", "official-default-layout"])
@pytest.mark.parametrize("variant,kw", CASES, ids=[f"{v}-{i}" for i, (v, _) in enumerate(CASES)])
def test_greedy_frames_and_waveform_match_official(variant, kw, non_streaming):
    kind = variant.split("-", 1)[1]
    ref_audio = reference_clip() if kind == "Base" else None
    off_codes, off_wav = official_generate(
        cached_model_dir(variant), variant, TEXT, speaker=kw.get("speaker"), language=kw["language"],
        instruct=kw.get("instruct"), ref_audio=ref_audio, ref_text=kw.get("ref_text"),
        x_vector_only=kw.get("x_vector_only", False), non_streaming=non_streaming, max_new_tokens=MAX_NEW_TOKENS)
    ref = VoiceRef(ref_audio, SR, kw.get("ref_text"), kw.get("x_vector_only", False)) if ref_audio is not None else None
    codes, wav, chunks = ours(variant, text=TEXT, voice=kw.get("speaker"), language=kw["language"],
                              instruct=kw.get("instruct"), ref=ref, non_streaming_text=non_streaming)
    assert off_codes.shape[0] >= 5, "reference stopped too early to prove anything"
    np.testing.assert_array_equal(codes, off_codes)
    assert_audio_close(wav, off_wav)
    assert chunks[-1].final and chunks[-1].finish_reason in ("eos", "max_frames")


@pytest.mark.parametrize("model_type,official", [("custom_voice", "generate_custom_voice"),
                                                 ("voice_design", "generate_voice_design"),
                                                 ("base", "generate_voice_clone")])
def test_whole_text_takes_the_layout_the_official_function_defaults_to(model_type, official):
    from qwen_tts.inference.qwen3_tts_model import Qwen3TTSModel
    default = inspect.signature(getattr(Qwen3TTSModel, official)).parameters["non_streaming_mode"].default
    whole = TTSConfig.whole_text_layout.fget(SimpleNamespace(model_type=model_type))
    validator = Validator(SimpleNamespace(generation={}, whole_text_layout=whole), {}, 100, lambda *_: None)

    def layout(**kw) -> bool:
        return validator.prepare(SynthesisRequest(text="Hi", **kw)).non_streaming_text

    assert layout(non_streaming_text=None) is default
    assert layout(non_streaming_text=None, text_complete=False) is False      # streamed text: streaming layout
    assert layout() is False and layout(non_streaming_text=True) is True       # either layout on demand
