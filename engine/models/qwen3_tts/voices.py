"""Clone voices in an LRU in front of the shared voice store; a cached voice is used while its file is unchanged.
`capacity` bounds both: registering beyond it drops the least recently used voice from memory and disk."""
import threading
from collections import OrderedDict
from concurrent.futures import Future

from engine.api.request import EngineInputError, VoiceRef
from engine.api.voice_input import check_reference, check_voice_name, is_voice_name
from engine.models.qwen3_tts.prompt import Voice
from engine.models.qwen3_tts.voice_store import VoiceStore


class VoiceCache:
    def __init__(self, model, capacity: int = 64, store: VoiceStore | None = None):
        self.model, self.capacity, self.store = model, capacity, store
        self._voices: OrderedDict[str, tuple[Voice, int | None]] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, name: str) -> bool:
        if not is_voice_name(name):
            return False
        if self.store is not None:
            return self.store.version(name) is not None
        with self._lock:
            return name in self._voices

    def names(self) -> list[str]:
        if self.store is not None:
            return self.store.names()
        with self._lock:
            return list(self._voices)

    def get(self, name: str) -> Voice | None:
        version = self.store.version(name) if self.store is not None else None
        with self._lock:
            voice, cached = self._voices.get(name, (None, None))
            if voice is not None and cached == version:
                self._voices.move_to_end(name)
                if self.store is not None:
                    self.store.touch(name)
                return voice
            self._voices.pop(name, None)
        if version is None:
            return None
        voice = self.store.load(name, self.model.device)
        if voice is not None:
            self._keep(name, voice, version)
        return voice

    def delete(self, name: str) -> bool:
        with self._lock:
            cached = self._voices.pop(name, None) is not None
        return self.store.delete(name) if self.store is not None else cached

    def register(self, name: str, ref: VoiceRef, background) -> Future:
        """Computed by `background` (engine/core/background.py), never on the engine thread."""
        if self.model.cfg.model_type != "base":
            raise EngineInputError("invalid_request", "registering a cloned voice needs a Base model")
        check_voice_name(name)
        check_reference(ref)
        return background.submit(self._compute, name, ref)

    def _compute(self, name: str, ref: VoiceRef) -> str:
        voice = self.model.make_voice(ref)
        if self.store is not None:
            self.store.save(name, voice, ref.text)
        self._keep(name, voice, self.store.version(name) if self.store is not None else None)
        return name

    def _keep(self, name: str, voice: Voice, version: int | None) -> None:
        with self._lock:
            self._voices[name] = (voice, version)
            self._voices.move_to_end(name)
            while len(self._voices) > self.capacity:
                self._voices.popitem(last=False)
