"""Clone voices: conditioning computed once (x-vector, reference codes, transcript ids), kept in a bounded LRU."""
import threading
from collections import OrderedDict
from concurrent.futures import Future

from .prompt import Voice
from .request import EngineInputError, VoiceRef


class VoiceCache:
    def __init__(self, model, capacity: int = 64):
        self.model, self.capacity = model, capacity
        self._voices: OrderedDict[str, Voice] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, name: str) -> bool:
        with self._lock:
            return name in self._voices

    def names(self) -> list[str]:
        with self._lock:
            return list(self._voices)

    def get(self, name: str) -> Voice | None:
        with self._lock:
            if name in self._voices:
                self._voices.move_to_end(name)
            return self._voices.get(name)

    def delete(self, name: str) -> bool:
        with self._lock:
            return self._voices.pop(name, None) is not None

    def register(self, name: str, ref: VoiceRef, inbox) -> Future:
        if self.model.cfg.model_type != "base":
            raise EngineInputError("invalid_request", "registering a cloned voice needs a Base model")
        if not ref.x_vector_only and not (ref.text or "").strip():
            raise EngineInputError("missing_reference", "ICL voice cloning needs the reference transcript")
        future: Future = Future()
        inbox.put(("voice", name, ref, future))
        return future

    def compute(self, name: str, ref: VoiceRef, future: Future) -> None:
        """Engine thread."""
        if not future.set_running_or_notify_cancel():   # the caller gave up (cancelled): setting it would raise here
            return
        try:
            voice = self.model.make_voice(ref)
        except Exception as exc:
            future.set_exception(exc)
            return
        with self._lock:
            self._voices[name] = voice
            self._voices.move_to_end(name)
            while len(self._voices) > self.capacity:
                self._voices.popitem(last=False)
        future.set_result(name)
