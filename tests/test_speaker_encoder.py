"""Our x-vector speaker encoder against the official one: same mel, same weights, same embedding."""
from types import SimpleNamespace

import librosa
import numpy as np
import pytest
import torch

from engine.models.qwen3_tts.log_mel import log_mel_spectrogram, slaney_mel_filters
from engine.models.weights import seed_weights
from engine.models.qwen3_tts.checkpoint import tiny_tts_config
from engine.models.qwen3_tts.speaker_encoder import SpeakerEncoder

pytestmark = pytest.mark.slow                   # parity with qwen-tts, whose import alone takes 4 s
ref = pytest.importorskip("qwen_tts.core.models.modeling_qwen3_tts")
from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSSpeakerEncoderConfig  # noqa: E402


def clip(samples: int, seed: int) -> np.ndarray:
    t = np.arange(samples) / 24000
    noise = np.random.default_rng(seed).standard_normal(samples)
    return (0.3 * np.sin(2 * np.pi * (150 + 40 * seed) * t) + 0.05 * noise).astype(np.float32)


def official_mel(audio: np.ndarray) -> torch.Tensor:
    return ref.mel_spectrogram(torch.from_numpy(audio)[None], n_fft=1024, num_mels=128, sampling_rate=24000,
                               hop_size=256, win_size=1024, fmin=0, fmax=12000)


def test_filterbank_matches_librosa():
    ours = slaney_mel_filters(24000, 1024, 128, 0.0, 12000.0).numpy()
    theirs = librosa.filters.mel(sr=24000, n_fft=1024, n_mels=128, fmin=0, fmax=12000, htk=False, norm="slaney")
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("samples", [24000, 37119])
def test_mel_matches_official(samples):
    audio = clip(samples, seed=1)
    torch.testing.assert_close(log_mel_spectrogram(torch.from_numpy(audio)[None]), official_mel(audio),
                               rtol=0, atol=1e-5)


@pytest.fixture(scope="module")
def encoders():
    config = tiny_tts_config("1.7B-Base")["speaker_encoder_config"]
    official = ref.Qwen3TTSSpeakerEncoder(Qwen3TTSSpeakerEncoderConfig(**config)).eval()
    seed_weights(official, seed=7)
    ours = SpeakerEncoder(config).eval()
    ours.load_state_dict(official.state_dict(), strict=True)
    return official, ours


def test_state_dict_keys_match_checkpoint_layout(encoders):
    official, ours = encoders
    assert list(ours.state_dict()) == list(official.state_dict())
    assert {"blocks.0.conv.weight", "blocks.1.res2net_block.blocks.0.conv.weight", "blocks.1.se_block.conv1.weight",
            "mfa.conv.weight", "asp.tdnn.conv.weight", "asp.conv.weight", "fc.weight"} <= set(ours.state_dict())


@pytest.mark.parametrize("samples,seed", [(19200, 0), (53331, 3)])
def test_embedding_matches_official(encoders, samples, seed):
    official, ours = encoders
    audio = clip(samples, seed)
    wrapper = SimpleNamespace(speaker_encoder=official, device=torch.device("cpu"), dtype=torch.float32)
    expected = ref.Qwen3TTSForConditionalGeneration.extract_speaker_embedding(wrapper, audio, 24000)
    got = ours.embed(audio)
    assert got.shape == (official.fc.out_channels,) and got.dtype == torch.float32
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours.embed(torch.from_numpy(audio)), expected, rtol=1e-5, atol=1e-5)


def test_published_dims():
    with torch.device("meta"):
        encoder = SpeakerEncoder({"enc_dim": 2048, "sample_rate": 24000})  # 1.7B-Base's config
    assert sum(p.numel() for p in encoder.parameters()) == pytest.approx(12.0e6, rel=0.01)
