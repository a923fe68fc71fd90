"""Registered clone voices on disk, one file per voice, written atomically (temporary name, then rename)."""
import json
import os
import re
import tempfile
import time
from pathlib import Path

from safetensors.torch import load_file, safe_open, save_file

from engine.models.qwen3_tts.prompt import Voice

SUFFIX = ".safetensors"


def model_folder(model_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", model_name.rstrip("/").split("/")[-1].replace("dummy:", "dummy-"))


class VoiceStore:
    def __init__(self, path: str | os.PathLike, model_name: str = ""):
        self.path, self.model_name = Path(path), model_name
        self.path.mkdir(parents=True, exist_ok=True)

    @classmethod
    def for_model(cls, root: str | os.PathLike, model_name: str) -> "VoiceStore":
        return cls(Path(root).expanduser() / model_folder(model_name), model_name)

    def file(self, name: str) -> Path:
        return self.path / f"{name}{SUFFIX}"

    def names(self) -> list[str]:
        return sorted(f[:-len(SUFFIX)] for f in os.listdir(self.path) if f.endswith(SUFFIX) and not f.startswith("."))

    def version(self, name: str) -> int | None:
        try:
            return os.stat(self.file(name)).st_mtime_ns
        except FileNotFoundError:
            return None

    def save(self, name: str, voice: Voice, text: str | None = None) -> None:
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

    def load(self, name: str, device) -> Voice | None:
        try:
            with safe_open(self.file(name), "pt") as f:
                meta = f.metadata()
            tensors = load_file(self.file(name))
        except FileNotFoundError:
            return None
        tensors = {key: t.to(device) for key, t in tensors.items()}
        return Voice(xvector=tensors["xvector"], ref_codes=tensors.get("ref_codes"),
                     ref_text_ids=json.loads(meta["ref_text_ids"]))

    def delete(self, name: str) -> bool:
        try:
            os.unlink(self.file(name))
            return True
        except FileNotFoundError:
            return False
