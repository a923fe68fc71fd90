"""What a front end holds of the core's state: the registered voices as last reported, and the aligner's submit."""
from concurrent.futures import Future


class VoiceNames:
    """The registered clone voices as the core last reported them (the core checks again at admission)."""

    def __init__(self):
        self.known: list[str] = []

    def __contains__(self, name: str) -> bool:
        return name in self.known

    def names(self) -> list[str]:
        return list(self.known)


class RemoteAligner:
    """The core's AlignmentService.submit across the process boundary: a Future of the units' (start, end) spans."""

    def __init__(self, client):
        self.client = client

    def submit(self, audio, units: list[str], due: float | None = None) -> Future:
        return self.client._call("align", audio, units, due, future=Future())
