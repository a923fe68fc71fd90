"""Registered clone voices on disk, one file per voice, written atomically (temporary name, then rename). A file
is only ever named from a valid voice name (engine/api/voice_input.py): nothing outside the folder can be opened."""
import json
import os
import re
import tempfile
import time
from pathlib import Path

from safetensors.torch import load_file, safe_open, save_file

from engine.api.voice_input import is_voice_name
from engine.models.qwen3_tts.prompt import Voice

SUFFIX = ".safetensors"
SETTLED_NS = 50_000_000          # a folder changed this recently may change again within its timestamp's tick


def model_folder(model_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", model_name.rstrip("/").split("/")[-1].replace("dummy:", "dummy-"))


class VoiceStore:
    def __init__(self, path: str | os.PathLike, model_name: str = "", capacity: int | None = None):
        self.path, self.model_name, self.capacity = Path(path), model_name, capacity
        self.path.mkdir(parents=True, exist_ok=True)
        self._listed: tuple[int, list[str]] | None = None      # (the folder's mtime, its voices)
        if capacity is not None:
            self.evict(capacity)

    @classmethod
    def for_model(cls, root: str | os.PathLike, model_name: str, capacity: int | None = None) -> "VoiceStore":
        return cls(Path(root).expanduser() / model_folder(model_name), model_name, capacity)

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
            os.utime(self.file(name), ns=(time.time_ns(), stat.st_mtime_ns))

    def _stat(self, name: str) -> os.stat_result | None:
        try:
            return os.stat(self.file(name)) if is_voice_name(name) else None
        except FileNotFoundError:
            return None

    def save(self, name: str, voice: Voice, text: str | None = None) -> None:
        if not is_voice_name(name):
            raise ValueError(f"{name!r:.40} is not a voice name")
        tensors = {"xvector": voice.xvector.cpu().contiguous()}
        if voice.ref_codes is not None:
            tensors["ref_codes"] = voice.ref_codes.cpu().contiguous()
        meta = dict(name=name, model=self.model_name, created=f"{time.time():.3f}", text=text or "",
                    x_vector_only=str(voice.ref_codes is None).lower(), ref_text_ids=json.dumps(voice.ref_text_ids))
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=f".{name}.", suffix=".tmp")
        os.close(fd)
        try:
            save_file(tensors, tmp, metadata=meta)
            os.replace(tmp, self.file(name))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        if self.capacity is not None:
            self.evict(self.capacity, keep=name)

    def evict(self, capacity: int, keep: str | None = None) -> list[str]:
        """Beyond `capacity` voices, the least recently used (or registered) go; `keep` is never one of them."""
        used = [(stat.st_atime_ns, name) for name in self.names() if (stat := self._stat(name))]
        gone = [name for _, name in sorted(used) if name != keep][:max(0, len(used) - capacity)]
        for name in gone:
            self.delete(name)
        return gone

    def load(self, name: str, device) -> Voice | None:
        if (path := self.file(name)) is None:
            return None
        try:
            with safe_open(path, "pt") as f:
                meta = f.metadata()
            tensors = load_file(path)
        except FileNotFoundError:
            return None
        self.touch(name)
        tensors = {key: t.to(device) for key, t in tensors.items()}
        return Voice(xvector=tensors["xvector"], ref_codes=tensors.get("ref_codes"),
                     ref_text_ids=json.loads(meta["ref_text_ids"]))

    def delete(self, name: str) -> bool:
        if not is_voice_name(name):
            return False
        try:
            os.unlink(self.file(name))
            return True
        except FileNotFoundError:
            return False
