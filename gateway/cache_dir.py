"""--cache-dir: torch.compile's and Triton's caches (compiled kernels, autotuning picks) kept across restarts."""
import os
import stat
from pathlib import Path

from .fatal import StartupError

DEFAULT = os.environ.get("QWEN_TTS_GATEWAY_CACHE", "~/.cache/qwen-tts-gateway/compile")
VARIABLES = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}    # -> their folder in it


def add_argument(p) -> None:
    p.add_argument("--cache-dir", default=DEFAULT,
                   help="compiled kernels and autotuning picks (torch.compile, Triton) are kept here, so a restart "
                        "skips compiling; also QWEN_TTS_GATEWAY_CACHE; '' leaves torch's own (/tmp, lost with a "
                        "container)")


def use(path: str) -> Path | None:
    """Before anything compiles (an engine core started after this inherits it): the caches go under `path`."""
    if not path:
        return None
    root = Path(path).expanduser().absolute()
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        mode = root.stat().st_mode
    except OSError as exc:
        raise StartupError(f"--cache-dir {root}: {exc.strerror}; choose a writable folder, or '' for none") from exc
    if mode & stat.S_IWOTH:
        raise StartupError(f"--cache-dir {root} is writable by every user, and this process runs the kernels "
                           f"compiled there: chmod o-w it or choose another folder")
    for variable, folder in VARIABLES.items():
        os.environ[variable] = str(root / folder)
    return root
