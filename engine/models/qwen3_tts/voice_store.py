"""Registered clone voices on disk, one file per voice, written atomically (temporary name, then rename)."""
import json
import os
import tempfile
import time
from pathlib import Path

from safetensors.torch import load_file, safe_open, save_file

from engine.api.voice_input import is_voice_name
from engine.models.qwen3_tts.prompt import Voice
from engine.models.qwen3_tts.voice_files import VoiceFiles, model_folder


class VoiceStore(VoiceFiles):
    def __init__(self, path: str | os.PathLike, model_name: str = "", capacity: int | None = None):
        self.model_name = model_name
        super().__init__(path, capacity)

    @classmethod
    def for_model(cls, root: str | os.PathLike, model_name: str, capacity: int | None = None) -> "VoiceStore":
        return cls(Path(root).expanduser() / model_folder(model_name), model_name, capacity)

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
