"""Whisper log-mel features (WhisperFeatureExtractor as the aligner's processor runs it), in torch on any device:
16 kHz, n_fft 400, hop 160 (100 frames/s), slaney mel filters to 8 kHz, log10 floored at 1e-10, clamped to
8 below the maximum, then (x + 4) / 4. No padding, no 30 s truncation, no dither."""
from functools import lru_cache
from math import gcd

import numpy as np
import torch
import torch.nn.functional as F

SAMPLE_RATE, N_FFT, HOP = 16000, 400, 160


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    mel = 3.0 * hz / 200.0
    log_part = hz >= 1000.0
    mel[log_part] = 15.0 + np.log(hz[log_part] / 1000.0) * (27.0 / np.log(6.4))
    return mel


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    hz = 200.0 * mel / 3.0
    log_part = mel >= 15.0
    hz[log_part] = 1000.0 * np.exp(np.log(6.4) / 27.0 * (mel[log_part] - 15.0))
    return hz


@lru_cache(maxsize=2)
def mel_filters(n_mels: int) -> np.ndarray:
    """[n_fft // 2 + 1, n_mels] float64 slaney triangles with slaney area normalization (transformers' rounding)."""
    edges = _mel_to_hz(np.linspace(*_hz_to_mel(np.array([0.0, SAMPLE_RATE / 2])), n_mels + 2))
    bins = np.linspace(0, SAMPLE_RATE // 2, N_FFT // 2 + 1)
    offsets = edges[None, :] - bins[:, None]
    widths = np.diff(edges)
    rising, falling = -offsets[:, :-2] / widths[:-1], offsets[:, 2:] / widths[1:]
    return np.maximum(0.0, np.minimum(rising, falling)) * (2.0 / (edges[2:] - edges[:-2]))[None, :]


def log_mel(audio: torch.Tensor, n_mels: int = 128) -> torch.Tensor:
    """[samples] float32 (16 kHz) -> [n_mels, samples // 160] float32."""
    window = torch.hann_window(N_FFT, device=audio.device)
    spec = torch.stft(audio.float(), N_FFT, HOP, window=window, return_complex=True)
    power = spec[..., :-1].abs() ** 2
    filters = torch.from_numpy(mel_filters(n_mels)).to(audio.device, torch.float32)
    logs = torch.clamp(filters.T @ power, min=1e-10).log10()
    return (torch.maximum(logs, logs.max() - 8.0) + 4.0) / 4.0


def resample(audio: torch.Tensor, rate: int, target: int = SAMPLE_RATE, zero_crossings: int = 16) -> torch.Tensor:
    """[samples] at `rate` -> ceil(samples * target / rate) samples at `target`: a zero-phase Kaiser-windowed sinc
    low-pass at 90% of the lower Nyquist frequency, zeros beyond both ends (on the audio's device)."""
    if rate == target:
        return audio
    g = gcd(rate, target)
    up, down = target // g, rate // g
    span = max(up, down)
    n = 2 * zero_crossings * span + 1
    t = torch.arange(n, device=audio.device, dtype=torch.float64) - (n - 1) // 2
    cutoff = 0.45 / span
    taps = 2 * cutoff * torch.sinc(2 * cutoff * t) * torch.kaiser_window(n, False, 8.6, dtype=torch.float64,
                                                                         device=audio.device) * up
    stuffed = torch.zeros(len(audio) * up, device=audio.device, dtype=torch.float32)
    stuffed[::up] = audio
    out = F.conv1d(stuffed[None, None], taps.float()[None, None], padding=(n - 1) // 2)[0, 0, ::down]
    return out[:-(-len(audio) * up // down)]
