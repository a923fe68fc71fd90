"""What a front end holds of the core's state: the registered voices as last reported, and the aligner's submit."""
from concurrent.futures import Future

from engine.models.qwen3_tts.voice_files import VoiceFiles

from .messages import AdmitWords, Align, Unalign, VoiceList


class VoiceNames:
    """The registered clone voices as last known here (the core checks again at admission)."""

    def __init__(self):
        self.known: list[str] = []
        self.store: VoiceFiles | None = None

    def read(self, voices_dir: str | None) -> None:
        self.store = VoiceFiles(voices_dir) if voices_dir else None

    def take(self, msg: VoiceList) -> None:
        self.known = msg.names

    def __contains__(self, name: str) -> bool:
        return name in self.known or self.store is not None and self.store.version(name) is not None

    def names(self) -> list[str]:
        return list(self.known)


class RemoteAligner:
    def __init__(self, client):
        self.client = client

    def submit(self, audio, units: list[str], due: float | None = None) -> Future:
        """Cancelled (its context timed out or ended), the job is dropped unless its batch has begun."""
        return self.client.call(Align(next(self.client.keys), audio, units, due), Future(), dropped=Unalign)

    def admit(self) -> Future:
        """-> a Future of None (a new context gets words) or the reason it gets none."""
        return self.client.call(AdmitWords(next(self.client.keys)), Future())
