"""Whether a new context can have word timestamps: the aligner's device time (measured over the last seconds, plus the
contexts admitted lately whose audio has not come yet, at its learnt cost) within a share of the device time the engine
plans for side work, and its words staying ahead of the listeners. Contexts already admitted keep their words."""
import threading
from collections import deque


class WordsAdmission:
    def __init__(self, clock, fill: float = 0.8, window_s: float = 2.0, ramp_s: float = 1.0,
                 context_audio: float = 2.0, margin_s: float = 1.0):
        """`context_audio`: audio seconds a second a new context is expected to submit (faster than real time while
        the engine runs ahead, windows re-aligned in part); `margin_s`: words that came less than this before a
        real-time player passed them mean the aligner is behind."""
        self.clock, self.fill, self.window_s, self.ramp_s = clock, fill, window_s, ramp_s
        self.context_audio, self.margin_s = context_audio, margin_s
        self.spent: deque = deque()          # (time, device seconds) of the aligner's turns in the window
        self.device_s = 0.0
        self.admitted: deque = deque()       # when each context of the last `ramp_s` was admitted
        self.refused_behind = 0              # refusals because words came too late (the rest: no device time)
        self._lock = threading.Lock()        # used() on the aligner's thread, admit() on the engine core's

    def used(self, device_s: float) -> None:
        with self._lock:
            now = self.clock.monotonic()
            self._forget(now)
            self.spent.append((now, device_s))
            self.device_s += device_s

    def recent_use(self) -> float:
        """The aligner's device seconds a second over the window: what its turns took, against the plan's capacity."""
        with self._lock:
            self._forget(self.clock.monotonic())
            return self.device_s / self.window_s

    def admit(self, per_audio_s: float, capacity: float, late_s: float) -> str | None:
        """None: admitted; else the reason. `capacity`: side work's device seconds a second; `late_s`: how long after
        a real-time player passed its window the last batch's latest words came (negative: before)."""
        with self._lock:
            now = self.clock.monotonic()
            self._forget(now)
            demand = self.device_s / self.window_s + (len(self.admitted) + 1) * self.context_audio * per_audio_s
            if late_s > -self.margin_s:
                self.refused_behind += 1
                return f"the aligner is behind (words came {late_s:+.2f} s from a listener passing them)"
            if demand > self.fill * capacity:
                return (f"the device has no time left for word alignment at this load ({demand:.2f} device-s/s "
                        f"wanted, {capacity:.2f} planned)")
            self.admitted.append(now)
            return None

    def _forget(self, now: float) -> None:
        while self.spent and self.spent[0][0] < now - self.window_s:
            self.device_s -= self.spent.popleft()[1]
        while self.admitted and self.admitted[0] < now - self.ramp_s:
            self.admitted.popleft()
