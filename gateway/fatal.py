"""Fatal start-up errors as one line that says what to do; the traceback only at --log-level debug."""
import logging

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
KILLED = -9


class StartupError(RuntimeError):
    """Its message is the one line the user reads."""


def one_line(exc: BaseException) -> str:
    import torch

    from engine import EngineInputError, ModelLoadError
    if isinstance(exc, (StartupError, ModelLoadError, EngineInputError, FileNotFoundError)):
        return str(exc)
    if isinstance(exc, torch.OutOfMemoryError):
        return ("out of GPU memory while starting: lower --max-active, --kv-tokens-per-stream or "
                "--gpu-memory-utilization, or free the GPU")
    if isinstance(exc, MemoryError):
        return "out of memory while starting: lower --max-active or --kv-tokens-per-stream"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} (--log-level debug shows where)"


def exited(code: int | None) -> str:
    if code == KILLED:
        return ("the engine process was killed (code -9), most likely for lack of memory: lower --max-active or "
                "--kv-tokens-per-stream (README: Memory)")
    return f"the engine process exited (code {code})"


def log_failure(log: logging.Logger, exc: BaseException) -> str:
    """Logs the one line (with the traceback when debug is on) and returns it."""
    line = one_line(exc)
    log.error("%s", line, exc_info=log.isEnabledFor(logging.DEBUG))
    return line
