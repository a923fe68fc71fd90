"""Shared assertions, and the property tests' example counts."""
import numpy as np
from hypothesis import settings


def examples(full: int) -> int:
    """`full` examples, or a quarter of them (at least 10) under the "inner" profile that tests/conftest.py loads for
    `-m "not slow"`: the same derandomized sequence, cut short."""
    return max(full * settings().max_examples // settings.get_profile("default").max_examples, min(full, 10))


def assert_audio_close(actual: np.ndarray, expected: np.ndarray) -> None:
    """float32 waveforms computed with another summation order (batching, chunking, kernels) through ~40 conv
    layers: every sample within 5e-4 (+0.1%), and the error energy 80 dB under the signal."""
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=5e-4)
    assert np.linalg.norm(actual - expected) <= 1e-4 * np.linalg.norm(expected)
    assert np.std(expected) > 1e-3
