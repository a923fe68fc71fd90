"""What a real-time listener has heard: its player starts at the first audio and plays at the sample rate."""


class ListenerClock:
    def __init__(self, sample_rate: int):
        self.sample_rate = sample_rate
        self.started_at: float | None = None      # monotonic seconds of the first audio
        self.sent_samples = 0
        self.due_until_s = 0.0                    # when a player that waits out each gap ends the audio sent so far

    @property
    def started(self) -> bool:
        return self.started_at is not None

    def add(self, samples: int, now: float) -> float:
        """Returns when the player needs these samples (now, or when it ends what was sent before)."""
        if self.started_at is None:
            self.started_at = now
        due = max(now, self.due_until_s)
        self.due_until_s = due + samples / self.sample_rate
        self.sent_samples += samples
        return due

    def played_s(self, now: float) -> float:
        return 0.0 if self.started_at is None else now - self.started_at

    def buffered_s(self, now: float) -> float:
        """Sent and not yet played; below zero: how far the listener fell behind."""
        return self.sent_samples / self.sample_rate - self.played_s(now)
