"""Per-stream streaming metrics from chunk arrival times, and their summary."""
from dataclasses import dataclass, field

import numpy as np

SAMPLE_RATE = 24000


@dataclass
class StreamRecord:
    submitted: float
    arrivals: list[float] = field(default_factory=list)   # perf_counter at each chunk
    samples: list[int] = field(default_factory=list)      # samples in each chunk
    sent: list[float] = field(default_factory=list)       # perf_counter when the engine sent each chunk (if known)
    chars: int = 0

    @property
    def ttfa(self) -> float:
        return self.arrivals[0] - self.submitted

    @property
    def audio_s(self) -> float:
        return sum(self.samples) / SAMPLE_RATE

    @property
    def rtf(self) -> float:
        return (self.arrivals[-1] - self.submitted) / max(self.audio_s, 1e-9)

    def _waits(self, times: list[float] | None = None):
        """A real-time player that starts at the first chunk and waits whenever it runs dry (chunks at their `times`:
        default, their arrivals): per chunk, where playback stands when it is needed (s after the first chunk) and
        how long the player waits for it."""
        times = times or self.arrivals
        play_end = times[0]
        for t, n in zip(times, self.samples):
            yield play_end - times[0], max(0.0, t - play_end)
            play_end = max(play_end, t) + n / SAMPLE_RATE

    def underrun_s(self, times: list[float] | None = None) -> float:
        """The player's stall time in all."""
        return sum(wait for _, wait in self._waits(times))

    def first_stall_s(self) -> float | None:
        """Where the player first runs dry, seconds after the first chunk (None: never)."""
        return next((at for at, wait in self._waits() if wait > 1e-3), None)

    @property
    def viable(self) -> bool:
        """Every chunk arrives before a player started at the first chunk needs it (no stall)."""
        return self.underrun_s() <= 1e-3


def summarize(records: list[StreamRecord], wall_s: float) -> dict:
    ttfa = np.array([r.ttfa for r in records]) * 1000
    rtf = np.array([r.rtf for r in records])
    audio = sum(r.audio_s for r in records)
    stalls = [t for r in records if (t := r.first_stall_s()) is not None]
    return dict(streams=len(records), ttfa_p50_ms=float(np.percentile(ttfa, 50)),
                ttfa_p90_ms=float(np.percentile(ttfa, 90)), ttfa_p99_ms=float(np.percentile(ttfa, 99)),
                rtf_p50=float(np.percentile(rtf, 50)), rtf_p90=float(np.percentile(rtf, 90)),
                viability=float(np.mean([r.viable for r in records])),
                underrun_s_mean=float(np.mean([r.underrun_s() for r in records])),
                viability_engine=float(np.mean([r.underrun_s(r.sent) <= 1e-3 for r in records]))
                if all(r.sent for r in records) else None,
                first_stall_p10_p50_p90_s=[float(np.percentile(stalls, q)) for q in (10, 50, 90)] if stalls else None,
                audio_s_per_s=audio / wall_s, chars_per_s=sum(r.chars for r in records) / wall_s, wall_s=wall_s)
