"""Per-stream streaming metrics from chunk arrival times, and their summary."""
from dataclasses import dataclass, field

import numpy as np

SAMPLE_RATE = 24000
STALL_S = 1e-3            # a player's wait up to this is no stall


@dataclass
class StreamRecord:
    submitted: float
    arrivals: list[float] = field(default_factory=list)   # perf_counter at each chunk
    samples: list[int] = field(default_factory=list)      # samples in each chunk
    sent: list[float] = field(default_factory=list)       # perf_counter when the engine sent each chunk (if known)
    chars: int = 0
    rate: int = SAMPLE_RATE                               # samples per second
    words: list[tuple[float, float]] = field(default_factory=list)   # per word: (arrival, end in s of the audio)
    cancel_answer_s: float | None = None                  # a barge-in: its cancel to `cancelled`
    spoken_known: bool | None = None                      # its `cancelled` held the spoken split

    @property
    def ttfa(self) -> float:
        return self.arrivals[0] - self.submitted

    @property
    def audio_s(self) -> float:
        return sum(self.samples) / self.rate

    @property
    def rtf(self) -> float:
        return (self.arrivals[-1] - self.submitted) / max(self.audio_s, 1e-9)

    def _playback(self, times: list[float] | None = None):
        """A real-time player that starts at the first chunk and waits whenever it runs dry (chunks at their `times`:
        default, their arrivals): per chunk, when the player needs it and how long it waits for it."""
        times = times or self.arrivals
        play_end = times[0]
        for t, n in zip(times, self.samples):
            yield play_end, max(0.0, t - play_end)
            play_end = max(play_end, t) + n / self.rate

    def underrun_s(self, times: list[float] | None = None) -> float:
        """The player's stall time in all."""
        return sum(wait for _, wait in self._playback(times))

    def first_stall_s(self) -> float | None:
        """Where the player first runs dry, seconds after the first chunk (None: never)."""
        return next((needed - self.arrivals[0] for needed, wait in self._playback() if wait > STALL_S), None)

    @property
    def viable(self) -> bool:
        """Every chunk arrives before a player started at the first chunk needs it (no stall)."""
        return self.underrun_s() <= STALL_S

    @property
    def viable_share(self) -> float:
        """The share of chunks that arrive before the player needs them."""
        return float(np.mean([wait <= STALL_S for _, wait in self._playback()]))

    def word_leads(self) -> list[float]:
        """Per word: how long before the player reaches the word's end its timestamp arrived (negative: late)."""
        return [lead for lead, _ in self._word_leads()]

    def late_words(self) -> tuple[int, int, int]:
        """Late words: all, those among the context's first three, those that came with its last words message."""
        last = max((arrival for arrival, _ in self.words), default=None)
        late = [(i, arrival) for i, (lead, arrival) in enumerate(self._word_leads()) if lead < 0]
        return len(late), sum(i < 3 for i, _ in late), sum(arrival == last for _, arrival in late)

    def _word_leads(self) -> list[tuple[float, float]]:
        starts = np.cumsum([0] + self.samples) / self.rate                  # each chunk's first sample, s
        playing = [needed + wait for needed, wait in self._playback()]      # when each chunk starts playing
        leads = []
        for arrival, end in self.words:
            chunk = max(0, int(np.searchsorted(starts, end)) - 1)
            if end <= starts[-1]:
                leads.append((float(playing[chunk] + end - starts[chunk] - arrival), arrival))
        return leads


def summarize(records: list[StreamRecord], wall_s: float) -> dict:
    ttfa = np.array([r.ttfa for r in records]) * 1000
    rtf = np.array([r.rtf for r in records])
    audio = sum(r.audio_s for r in records)
    stalls = [t for r in records if (t := r.first_stall_s()) is not None]
    return dict(streams=len(records), ttfa_p50_ms=float(np.percentile(ttfa, 50)),
                ttfa_p90_ms=float(np.percentile(ttfa, 90)), ttfa_p95_ms=float(np.percentile(ttfa, 95)),
                ttfa_p99_ms=float(np.percentile(ttfa, 99)),
                rtf_p50=float(np.percentile(rtf, 50)), rtf_p90=float(np.percentile(rtf, 90)),
                viability=float(np.mean([r.viable for r in records])),
                viable_share_mean=float(np.mean([r.viable_share for r in records])),
                underrun_s_mean=float(np.mean([r.underrun_s() for r in records])),
                viability_engine=float(np.mean([r.underrun_s(r.sent) <= STALL_S for r in records]))
                if all(r.sent for r in records) else None,
                first_stall_p10_p50_p90_s=[float(np.percentile(stalls, q)) for q in (10, 50, 90)] if stalls else None,
                audio_s_per_s=audio / wall_s, chars_per_s=sum(r.chars for r in records) / wall_s, wall_s=wall_s)
