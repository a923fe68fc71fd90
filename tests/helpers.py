"""Shared assertions."""
import numpy as np


def assert_audio_close(actual: np.ndarray, expected: np.ndarray) -> None:
    """float32 waveforms computed with another summation order (batching, chunking, kernels) through ~40 conv
    layers: every sample within 5e-4 (+0.1%), and the error energy 80 dB under the signal."""
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=5e-4)
    assert np.linalg.norm(actual - expected) <= 1e-4 * np.linalg.norm(expected)
    assert np.std(expected) > 1e-3
