"""One stream's frames between the step and its listener: when a chunk goes out and how many frames it holds."""
from engine.core.listener_clock import ListenerClock
from engine.models.base import AudioFormat


def margin_s(step_s: float) -> float:
    """A listener with less audio than this is served at once."""
    return max(0.3, 4 * step_s)


def first_chunk_frames(step_s: float, frame_s: float, admitted: int, admitting: bool) -> int:
    """A first chunk must outlast the wait for the next: a step, one more when read late, and the jitter."""
    return 2 if admitted > 1 or admitting or 3 * step_s > frame_s else 1


class Playout:
    def __init__(self, chunk_frames: tuple[int, ...], adaptive: bool, audio: AudioFormat):
        self.chunk_frames, self.adaptive, self.audio = chunk_frames, adaptive, audio
        self.listener = ListenerClock(audio.sample_rate)
        self.unread = 0                       # frames decoded on the device, not read yet
        self.unsent: list = []                # (codes [K], PCM [samples]) read, not sent
        self.chunks = 0

    def chunk_size(self, first: int = 1) -> int:
        sizes = self.chunk_frames
        return sizes[min(self.chunks, len(sizes) - 1)] if self.chunks else max(sizes[0], first)

    def buffered_s(self, now: float) -> float:
        return self.listener.buffered_s(now)

    def ahead_s(self, now: float) -> float:
        return self.buffered_s(now) + len(self.unsent) * self.audio.frame_s

    def should_send(self, now: float, margin: float, first: int, generated: bool) -> bool:
        """`generated`: the stream makes no more frames."""
        if generated and not self.unread or len(self.unsent) >= self.chunk_size(first):
            return True
        return bool(self.unsent) and self.adaptive and self.listener.started and self.buffered_s(now) < margin

    def take(self, first: int, now: float) -> list:
        """The frames of the next chunk, counted as sent at `now`."""
        n = min(len(self.unsent), self.chunk_size(first))
        frames, self.unsent = self.unsent[:n], self.unsent[n:]
        self.chunks += 1
        self.listener.add(n * self.audio.samples_per_frame, now)
        return frames
