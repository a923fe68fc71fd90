"""Log-mel features as the reference speaker encoder computes them, without librosa."""
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F


F_SP, MIN_LOG_HZ = 200.0 / 3, 1000.0          # Slaney scale
MIN_LOG_MEL, LOG_STEP = MIN_LOG_HZ / F_SP, np.log(6.4) / 27.0


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    return np.where(hz >= MIN_LOG_HZ, MIN_LOG_MEL + np.log(np.maximum(hz, MIN_LOG_HZ) / MIN_LOG_HZ) / LOG_STEP, hz / F_SP)


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    return np.where(mel >= MIN_LOG_MEL, MIN_LOG_HZ * np.exp(LOG_STEP * (mel - MIN_LOG_MEL)), F_SP * mel)


@lru_cache(maxsize=4)
def slaney_mel_filters(sample_rate: int, n_fft: int, n_mels: int, fmin: float, fmax: float) -> torch.Tensor:
    """librosa.filters.mel(htk=False)."""
    fft_hz = np.fft.rfftfreq(n_fft, 1.0 / sample_rate)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(np.float64(fmin)), _hz_to_mel(np.float64(fmax)), n_mels + 2))
    widths = np.diff(edges)
    offsets = edges[:, None] - fft_hz[None, :]
    rising, falling = -offsets[:-2] / widths[:-1, None], offsets[2:] / widths[1:, None]
    triangles = np.maximum(0.0, np.minimum(rising, falling)).astype(np.float32)
    # the same rounding as librosa
    return torch.from_numpy((triangles * (2.0 / (edges[2:] - edges[:-2]))[:, None]).astype(np.float32))


def log_mel_spectrogram(audio: torch.Tensor, sample_rate: int = 24000, n_fft: int = 1024, hop: int = 256,
                        n_mels: int = 128, fmin: float = 0.0, fmax: float = 12000.0) -> torch.Tensor:
    pad = (n_fft - hop) // 2
    audio = F.pad(audio.unsqueeze(1), (pad, pad), mode="reflect").squeeze(1)
    window = torch.hann_window(n_fft, device=audio.device)
    spec = torch.stft(audio, n_fft, hop_length=hop, window=window, center=False, return_complex=True)
    magnitude = torch.sqrt(spec.real.square() + spec.imag.square() + 1e-9)
    filters = slaney_mel_filters(sample_rate, n_fft, n_mels, fmin, fmax).to(audio.device)
    return torch.log(torch.clamp(filters @ magnitude, min=1e-5))
