"""The aligner's log-mel features are computed over bucketed shapes (rows a power of two, samples whole seconds), so
that the FFT's and the resampler's plans are reused from batch to batch; each audio's frames are those of its batch
computed at its exact shape."""
import numpy as np
import pytest
import torch

from aligner import features
from aligner.features import log_mels, mel_shape


def audios(seconds: list[float], rate: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(0.1 * rng.standard_normal(int(s * rate))).astype(np.float32) for s in seconds]


@pytest.mark.parametrize("rate, seconds", [(24000, [0.5, 3.3, 1.0]), (16000, [2.0]), (22050, [0.31, 0.3]),
                                           (24000, [0.04])])
def test_bucketed_features_equal_the_exact_shapes(rate, seconds, monkeypatch):
    batch = audios(seconds, rate)
    bucketed, frames = log_mels(batch, rate, 128, "cpu")
    monkeypatch.setattr(features, "shape_bucket", lambda count, samples, rate: (count, samples))
    exact, exact_frames = log_mels(batch, rate, 128, "cpu")
    assert frames == exact_frames and bucketed.shape == exact.shape
    assert bucketed.shape[-1] == mel_shape([len(a) for a in batch], rate)[1]
    assert torch.isfinite(bucketed).all()
    torch.testing.assert_close(bucketed, exact, atol=1e-5, rtol=1e-5)


def test_batches_of_a_bucket_run_the_fft_on_one_shape(monkeypatch):
    shapes, stft = [], torch.stft
    monkeypatch.setattr(torch, "stft", lambda x, *a, **k: (shapes.append(tuple(x.shape)), stft(x, *a, **k))[1])
    for seconds in ([1.2, 3.1, 0.4], [2.6, 3.9, 0.2], [3.05, 0.9, 2.2, 1.0]):     # 3-4 rows, 3.05-3.9 s: one bucket
        log_mels(audios(seconds, 24000), 24000, 128, "cpu")
    assert len(shapes) == 3 and len(set(shapes)) == 1
