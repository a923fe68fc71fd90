"""numba stand-in for the official qwen-tts on the GPU machine (llvmlite's 60 MB wheel does not fit the carry):
librosa imports numba's decorators at import; the paths the benchmark uses (mel filterbanks) run no jitted code."""
__version__ = "0.0"


def _decorator(*args, **kwargs):
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


jit = njit = generated_jit = vectorize = guvectorize = stencil = cfunc = _decorator
prange = range
