"""Clone voices in an LRU in front of the shared voice store; a cached voice is used while its file is unchanged,
which is checked at most once a second per voice (another engine's change is seen within that second).
`capacity` bounds both: registering beyond it drops the least recently used voice from memory and disk."""
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from engine.api.request import EngineInputError, VoiceRef
from engine.api.voice_input import check_reference, check_voice_name, is_voice_name
from engine.models.qwen3_tts.prompt import Voice
from engine.models.qwen3_tts.voice_store import VoiceStore

RECHECK_S = 1.0


@dataclass
class Cached:
    voice: Voice
    version: int | None          # the file's, when it was last checked
    checked: float               # when (`clock`)


class VoiceCache:
    def __init__(self, model, capacity: int = 64, store: VoiceStore | None = None, clock=time.monotonic):
        self.model, self.capacity, self.store, self.clock = model, capacity, store, clock
        self._voices: OrderedDict[str, Cached] = OrderedDict()
        self._lock = threading.Lock()
        self._toucher = ThreadPoolExecutor(1, "voice-touch") if store is not None else None

    def __contains__(self, name: str) -> bool:
        if not is_voice_name(name):
            return False
        if self._fresh(name) is not None:
            return True
        return self.store is not None and self.store.version(name) is not None

    def names(self) -> list[str]:
        if self.store is not None:
            return self.store.names()
        with self._lock:
            return list(self._voices)

    def get(self, name: str) -> Voice | None:
        """A dict lookup while the voice was checked within RECHECK_S; else one stat, and its use recorded on disk
        (the eviction order) off the calling (engine) thread."""
        if (voice := self._fresh(name)) is not None:
            return voice
        if self.store is None:
            return None
        version = self.store.version(name)
        with self._lock:
            cached = self._voices.get(name)
            if cached is not None and cached.version == version:
                cached.checked = self.clock()
                self._voices.move_to_end(name)
                self._toucher.submit(self.store.touch, name)
                return cached.voice
            self._voices.pop(name, None)
        if version is None:
            return None
        voice = self.store.load(name, self.model.device)
        if voice is not None:
            self._keep(name, voice, version)
        return voice

    def _fresh(self, name: str) -> Voice | None:
        with self._lock:
            cached = self._voices.get(name)
            if cached is None or (self.store is not None and self.clock() - cached.checked >= RECHECK_S):
                return None
            self._voices.move_to_end(name)
            return cached.voice

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
            self._voices[name] = Cached(voice, version, self.clock())
            self._voices.move_to_end(name)
            while len(self._voices) > self.capacity:
                self._voices.popitem(last=False)
