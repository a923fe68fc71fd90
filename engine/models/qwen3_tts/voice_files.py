"""The voices folder without its tensors: a voice's file, the names listed, a file's version, eviction. Torch-free,
so that a front end reads the names the engine core wrote. A file is only ever named from a valid voice name
(engine/api/voice_input.py): nothing outside the folder can be opened."""
import os
import re
import time
from pathlib import Path

from engine.api.voice_input import is_voice_name

SUFFIX = ".safetensors"
SETTLED_NS = 50_000_000          # a folder changed this recently may change again within its timestamp's tick


def model_folder(model_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", model_name.rstrip("/").split("/")[-1].replace("dummy:", "dummy-"))


class VoiceFiles:
    def __init__(self, path: str | os.PathLike, capacity: int | None = None):
        self.path, self.capacity = Path(path), capacity
        self.path.mkdir(parents=True, exist_ok=True)
        self._listed: tuple[int, list[str]] | None = None      # (the folder's mtime, its voices)
        if capacity is not None:
            self.evict(capacity)

    def file(self, name: str) -> Path | None:
        return self.path / f"{name}{SUFFIX}" if is_voice_name(name) else None

    def names(self) -> list[str]:
        """Listed again only when the folder changed: one stat a call."""
        mtime = os.stat(self.path).st_mtime_ns
        if self._listed is None or self._listed[0] != mtime:
            names = sorted(f[:-len(SUFFIX)] for f in os.listdir(self.path)
                           if f.endswith(SUFFIX) and is_voice_name(f[:-len(SUFFIX)]))
            settled = time.time_ns() - mtime > SETTLED_NS
            self._listed = (mtime, names) if settled else None
            return names
        return list(self._listed[1])

    def version(self, name: str) -> int | None:
        return stat.st_mtime_ns if (stat := self._stat(name)) else None

    def touch(self, name: str) -> None:
        """A use: its access time orders eviction (its modification time stays the version)."""
        if stat := self._stat(name):
            try:
                os.utime(self.file(name), ns=(time.time_ns(), stat.st_mtime_ns))
            except FileNotFoundError:
                pass                             # deleted since: nothing left to order

    def _stat(self, name: str) -> os.stat_result | None:
        try:
            return os.stat(self.file(name)) if is_voice_name(name) else None
        except FileNotFoundError:
            return None

    def evict(self, capacity: int, keep: str | None = None) -> list[str]:
        """Beyond `capacity` voices, the least recently used (or registered) go; `keep` is never one of them."""
        used = [(stat.st_atime_ns, name) for name in self.names() if (stat := self._stat(name))]
        gone = [name for _, name in sorted(used) if name != keep][:max(0, len(used) - capacity)]
        for name in gone:
            self.delete(name)
        return gone

    def delete(self, name: str) -> bool:
        if not is_voice_name(name):
            return False
        try:
            os.unlink(self.file(name))
            return True
        except FileNotFoundError:
            return False
