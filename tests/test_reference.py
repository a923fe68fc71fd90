"""Self-check of the official-side fixtures (tests/reference.py): the tiny checkpoints load in the
official wrapper with the weights we drew, and greedy generation gives usable, deterministic outputs."""
import json
import logging

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tests.reference import (ASSETS, cached_model_dir, make_official_model_dir, official_decode, official_encode,
                             official_generate, official_last_prompt, official_model, official_speaker_embedding)

pytestmark = pytest.mark.slow                # the official wrapper

VARIANTS = ["1.7B-CustomVoice", "0.6B-CustomVoice", "1.7B-VoiceDesign", "1.7B-Base", "0.6B-Base"]
TEXT = "The quick brown fox jumps over the lazy dog, while the sun sets slowly behind the quiet hills."
REF_TEXT = "Hello there, this is a short reference clip."
FRAME = 1920


def ref_clip(seconds=2.0, seed=0):
    """Synthetic 24 kHz reference: two sines with vibrato plus seeded noise."""
    t = np.arange(int(seconds * 24000)) / 24000
    noise = np.random.default_rng(seed).standard_normal(t.size)
    return (0.3 * np.sin(2 * np.pi * 180 * t + 3 * np.sin(2 * np.pi * 5 * t))
            + 0.15 * np.sin(2 * np.pi * 410 * t) + 0.05 * noise).astype(np.float32)


def voice_kwargs(kind):
    return {"custom_voice": dict(speaker="vivian", language="english"),
            "voice_design": dict(instruct="A calm, deep male voice speaking slowly."),
            "base": dict(ref_audio=ref_clip(), ref_text=REF_TEXT)}[kind]


def check_output(codes, wav, extra_frames=0):
    assert codes.dtype == np.int64 and codes.ndim == 2 and codes.shape[1] == 16
    assert codes.shape[0] >= 10
    assert codes.min() >= 0 and codes.max() < 2048
    assert len(np.unique(codes[:, 0])) > codes.shape[0] // 3              # varies across frames
    assert all(len(np.unique(row)) > 4 for row in codes)                  # varies across codebooks
    assert wav.dtype == np.float32 and wav.shape == ((codes.shape[0] + extra_frames) * FRAME,)
    assert 0.01 < wav.std() < 0.9, wav.std()
    assert np.mean(np.abs(wav) >= 1 - 1e-6) < 0.01


@pytest.mark.parametrize("variant", VARIANTS)
def test_dir_layout_and_config(variant, tmp_path):
    d = cached_model_dir(variant)
    for name in ["config.json", "model.safetensors", "generation_config.json", "preprocessor_config.json",
                 "vocab.json", "merges.txt", "tokenizer_config.json", "speech_tokenizer/config.json",
                 "speech_tokenizer/preprocessor_config.json", "speech_tokenizer/model.safetensors"]:
        assert (d / name).is_file(), name
    ours, pub = (json.loads(p.read_text()) for p in (d / "config.json", ASSETS / "models" / variant / "config.json"))
    pub.pop("auto_map", None)
    assert set(ours) == set(pub) and set(ours["talker_config"]) == set(pub["talker_config"])
    for k, v in pub.items():
        if k not in ("talker_config", "speaker_encoder_config"):
            assert ours[k] == v, k
    for k, v in pub["talker_config"].items():
        if k.startswith("codec_") or k in ("spk_id", "spk_is_dialect", "vocab_size", "text_vocab_size",
                                           "num_code_groups", "pad_token_id"):
            assert ours["talker_config"][k] == v, k
    if "speaker_encoder_config" in pub:
        assert "model_type" not in ours["speaker_encoder_config"]
        assert ours["speaker_encoder_config"]["enc_dim"] == ours["talker_config"]["hidden_size"]
    assert json.loads((d / "generation_config.json").read_text()) == json.loads(
        (ASSETS / "models" / variant / "generation_config.json").read_text())
    # deterministic for (variant, seed)
    again = make_official_model_dir(variant, tmp_path / "again", seed=0)
    for f in sorted(p.relative_to(d) for p in d.rglob("*") if p.is_file()):
        assert (again / f).read_bytes() == (d / f).read_bytes(), f


@pytest.mark.parametrize("variant", ["1.7B-Base", "1.7B-CustomVoice"])
def test_official_loader_takes_our_weights(variant):
    from qwen_tts.inference.qwen3_tts_model import Qwen3TTSModel
    d = cached_model_dir(variant)
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("transformers")
    logger.addHandler(handler)
    try:
        w = Qwen3TTSModel.from_pretrained(str(d))
    finally:
        logger.removeHandler(handler)
    warned = [r.getMessage() for r in records if r.levelno >= logging.WARNING]   # e.g. missing/unexpected weights
    assert not warned, warned
    for model, file in ((w.model, d / "model.safetensors"),
                        (w.model.speech_tokenizer.model, d / "speech_tokenizer" / "model.safetensors")):
        saved, loaded = load_file(file), model.state_dict()
        loaded = {k: v for k, v in loaded.items() if not k.startswith("speech_tokenizer.")}
        assert set(saved) == set(loaded)
        for k, v in saved.items():
            assert torch.equal(v, loaded[k]), k
            assert v.abs().max() > 0, f"{k} is all zero"
    names = list(load_file(d / "speech_tokenizer" / "model.safetensors"))
    assert any(n.endswith("embedding_sum") for n in names) and any(n.endswith(".alpha") for n in names)
    pub = json.loads((ASSETS / "models" / variant / "config.json").read_text())
    assert (w.model.tts_model_type, w.model.tts_model_size) == (pub["tts_model_type"], pub["tts_model_size"])
    assert w.get_supported_speakers() == sorted(pub["talker_config"]["spk_id"])
    assert w.get_supported_languages() == sorted(["auto"] + [k for k in pub["talker_config"]["codec_language_id"]
                                                             if "dialect" not in k])


@pytest.mark.parametrize("variant", VARIANTS)
def test_official_greedy_generation(variant):
    d = cached_model_dir(variant)
    kind = official_model(d).model.tts_model_type
    kw = voice_kwargs(kind)
    ref_frames = 0
    if kind == "base":
        ref_codes = official_encode(d, kw["ref_audio"])
        ref_frames = len(ref_codes)
        assert ref_codes.shape == (-(-len(kw["ref_audio"]) // FRAME), 16)
    for non_streaming in (False, True):
        codes, wav = official_generate(d, kind, TEXT, non_streaming=non_streaming, **kw)
        p = official_last_prompt(d)
        print(f"{variant} {'non-streaming' if non_streaming else 'streaming'}: prefill {len(p['prefill'])} rows, "
              f"trailing {len(p['trailing'])}, {len(codes)} frames, wav std {wav.std():.3f}")
        check_output(codes, wav)
        if not non_streaming:                   # deterministic: a second call gives the same
            codes2, wav2 = official_generate(d, kind, TEXT, non_streaming=non_streaming, **kw)
            assert np.array_equal(codes, codes2) and np.array_equal(wav, wav2)
        # the wrapper's waveform is the official decode of (ref codes +) generated codes
        full = official_decode(d, np.concatenate([ref_codes, codes]) if ref_frames else codes)
        assert np.array_equal(full[ref_frames * FRAME:], wav)
    if kind == "base":
        codes, wav = official_generate(d, kind, TEXT, ref_audio=kw["ref_audio"], x_vector_only=True)
        print(f"{variant} x-vector only: prefill {len(official_last_prompt(d)['prefill'])} rows, {len(codes)} frames")
        check_output(codes, wav)
        emb = official_speaker_embedding(d, kw["ref_audio"])
        assert emb.shape == (official_model(d).model.config.speaker_encoder_config.enc_dim,)
        assert np.isfinite(emb).all() and emb.std() > 0
        # language auto: rows = 3 role + [nothink, think_bos, think_eos, x-vector, pad] (+tts_pad) + bos row
        talker = official_model(d).model.talker
        with torch.no_grad():
            tts_pad = talker.text_projection(talker.get_text_embeddings()(torch.tensor([[151671]])))[0, 0].numpy()
        np.testing.assert_allclose(official_last_prompt(d)["prefill"][6], tts_pad + emb, rtol=0, atol=1e-5)
