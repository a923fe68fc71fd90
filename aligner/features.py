"""Whisper log-mel features as the aligner's processor computes them, batched in torch on any device."""
from functools import lru_cache
from math import gcd

import numpy as np
import torch
import torch.nn.functional as F

from engine.core.transfer import upload

SAMPLE_RATE, N_FFT, HOP = 16000, 400, 160
BUCKET_S = 1.0


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
    edges = _mel_to_hz(np.linspace(*_hz_to_mel(np.array([0.0, SAMPLE_RATE / 2])), n_mels + 2))
    bins = np.linspace(0, SAMPLE_RATE // 2, N_FFT // 2 + 1)
    offsets = edges[None, :] - bins[:, None]
    widths = np.diff(edges)
    rising, falling = -offsets[:, :-2] / widths[:-1], offsets[:, 2:] / widths[1:]
    return np.maximum(0.0, np.minimum(rising, falling)) * (2.0 / (edges[2:] - edges[:-2]))[None, :]


@lru_cache(maxsize=8)
def _filters(n_mels: int, device) -> torch.Tensor:
    return torch.from_numpy(mel_filters(n_mels)).to(device, torch.float32)


@lru_cache(maxsize=8)
def _taps(up: int, down: int, zero_crossings: int, device) -> torch.Tensor:
    """A zero-phase Kaiser-windowed sinc low-pass at 90% of the lower Nyquist frequency, gain `up`."""
    span = max(up, down)
    n = 2 * zero_crossings * span + 1
    t = torch.arange(n, device=device, dtype=torch.float64) - (n - 1) // 2
    cutoff = 0.45 / span
    window = torch.kaiser_window(n, False, 8.6, dtype=torch.float64, device=device)
    return (2 * cutoff * torch.sinc(2 * cutoff * t) * window * up).float()[None, None]


def resampled_length(samples: int, rate: int, target: int = SAMPLE_RATE) -> int:
    g = gcd(rate, target)
    return -(-samples * (target // g) // (rate // g))


def resample(audio: torch.Tensor, rate: int, target: int = SAMPLE_RATE, zero_crossings: int = 16) -> torch.Tensor:
    if rate == target:
        return audio
    g = gcd(rate, target)
    up, down = target // g, rate // g
    taps = _taps(up, down, zero_crossings, audio.device)
    stuffed = torch.zeros(len(audio), audio.shape[1] * up, device=audio.device, dtype=torch.float32)
    stuffed[:, ::up] = audio
    with torch.backends.cudnn.flags(enabled=True, benchmark=False):
        # every batch has a new length: benchmarking each would sync beside the engine's steps
        # stride: only the kept outputs (22.05 kHz: 441 times fewer than filtering all, then keeping one in 441)
        out = F.conv1d(stuffed[:, None], taps, padding=(taps.shape[-1] - 1) // 2, stride=down)[:, 0]
    return out[:, :resampled_length(audio.shape[1], rate, target)]


def reflect_index(lengths: torch.Tensor, width: int, pad: int) -> torch.Tensor:
    t = torch.arange(width + 2 * pad, device=lengths.device)[None, :] - pad
    n = lengths[:, None]
    index = t.abs()
    index = torch.where(index >= n, 2 * (n - 1) - index, index)
    return torch.where(t < n + pad, torch.minimum(index.clamp(min=0), n - 1), 0)


def joined(audios: list[np.ndarray], pin: bool = False) -> torch.Tensor:
    flat = torch.from_numpy(np.concatenate(audios + [np.zeros(1, np.float32)]))
    return flat.pin_memory() if pin else flat


def padded(audios: list[np.ndarray], device, staged: torch.Tensor | None = None, rows: int = 0,
           samples: int = 0) -> torch.Tensor:
    """[max(rows, len(audios)), max(samples, longest)]: each audio, then zeros."""
    flat = upload(joined(audios) if staged is None else staged, device=device)
    sizes = upload([len(a) for a in audios] + [0] * (rows - len(audios)), device=device)
    t = torch.arange(max(samples, *map(len, audios)), device=device)[None, :]
    return flat[torch.where(t < sizes[:, None], (sizes.cumsum(0) - sizes)[:, None] + t, len(flat) - 1)]


def shape_bucket(count: int, samples: int, rate: int) -> tuple[int, int]:
    """A batch's rows (a power of two) and samples (whole BUCKET_S) for its features: the FFT's and the resampler's
    plans, made once per shape for some milliseconds of host time, are then reused from batch to batch."""
    step = int(BUCKET_S * rate)
    return 1 << (count - 1).bit_length(), -(-samples // step) * step


def mel_shape(samples: list[int], rate: int) -> tuple[list[int], int]:
    lengths = [resampled_length(n, rate) for n in samples]
    return [n // HOP for n in lengths], max(lengths) // HOP + 1


def log_mels(audios: list[np.ndarray], rate: int, n_mels: int, device,
             staged: torch.Tensor | None = None) -> tuple[torch.Tensor, list[int]]:
    """Mono float32 audios -> log-mel [batch, n_mels, frames] and each one's frame count. Computed over a bucketed
    shape (zero rows and samples past the audios'), which leaves each audio's frames as they are."""
    rows, samples = shape_bucket(len(audios), max(map(len, audios)), rate)
    lengths = [resampled_length(len(a), rate) for a in audios]
    n = upload(lengths + [resampled_length(samples, rate)] * (rows - len(audios)), device=device)
    x = resample(padded(audios, device, staged, rows, samples), rate)
    valid = torch.arange(x.shape[1], device=device)[None, :] < n[:, None]
    x = x / (x.abs() * valid).amax(1, keepdim=True).clamp(min=1.0)
    x = x.clamp(-1.0, 1.0).gather(1, reflect_index(n, x.shape[1], N_FFT // 2))
    window = torch.hann_window(N_FFT, device=device)
    power = torch.stft(x, N_FFT, HOP, window=window, center=False, return_complex=True).abs() ** 2
    logs = torch.clamp(_filters(n_mels, device).T @ power, min=1e-10).log10()
    frames, width = mel_shape([len(a) for a in audios], rate)
    live = torch.arange(logs.shape[-1], device=device)[None, :] < (n // HOP)[:, None]
    top = logs.masked_fill(~live[:, None], float("-inf")).amax((1, 2), keepdim=True)
    return ((torch.maximum(logs, top - 8.0) + 4.0) / 4.0)[:len(audios), :, :width], frames
