"""Counters and histograms kept in-process, rendered in the Prometheus text format for GET /metrics."""
import time
from collections import Counter, deque

TTFA_BUCKETS = (0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0)
RTF_BUCKETS = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 5.0)
RELAY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


class Histogram:
    def __init__(self, buckets: tuple[float, ...]):
        self.buckets = buckets
        self.counts: dict[str, list[int]] = {}
        self.sums: Counter = Counter()

    def merge(self, state: tuple) -> None:
        for label, counts in state[0].items():
            mine = self.counts.setdefault(label, [0] * (len(self.buckets) + 1))
            self.counts[label] = [a + b for a, b in zip(mine, counts)]
        self.sums.update(state[1])

    def observe(self, value: float, label: str) -> None:
        counts = self.counts.setdefault(label, [0] * (len(self.buckets) + 1))
        counts[next((i for i, b in enumerate(self.buckets) if value <= b), len(self.buckets))] += 1
        self.sums[label] += value

    def render(self, name: str, label_name: str) -> list[str]:
        lines = []
        for label, counts in sorted(self.counts.items()):
            total = 0
            for bound, count in zip([*map(str, self.buckets), "+Inf"], counts):
                total += count
                lines.append(f'{name}_bucket{{{label_name}="{label}",le="{bound}"}} {total}')
            lines.append(f'{name}_sum{{{label_name}="{label}"}} {self.sums[label]:.6f}')
            lines.append(f'{name}_count{{{label_name}="{label}"}} {total}')
        return lines


class FrameRate:
    def __init__(self, window: float = 10.0):
        self.window = window
        self.samples: deque[tuple[float, int]] = deque()

    def update(self, frames_total: int) -> float:
        now = time.monotonic()
        self.samples.append((now, frames_total))
        while len(self.samples) > 2 and now - self.samples[1][0] >= self.window:
            self.samples.popleft()
        (t0, f0), (t1, f1) = self.samples[0], self.samples[-1]
        return (f1 - f0) / (t1 - t0) if t1 > t0 else 0.0


class Metrics:
    def __init__(self):
        self.ttfa = Histogram(TTFA_BUCKETS)          # seconds from an utterance's first text to its first audio
        self.rtf = Histogram(RTF_BUCKETS)            # per utterance: generation time after first audio / its audio
        self.relay = Histogram(RELAY_BUCKETS)        # per chunk: seconds from the engine's send to its context
        # per chunk: seconds from the engine's send to this front end, the count, and the part before the core's I/O
        # thread took it
        self.arrival = [0.0, 0, 0.0]
        self.requests: Counter = Counter()           # engine requests started, by api
        self.errors: Counter = Counter()             # error events and responses, by code
        self.audio_samples = 0                       # samples (at the engine's rate) the engine delivered
        self.frame_rate = FrameRate()

    def snapshot(self, **gauges) -> dict:
        return dict(ttfa=(self.ttfa.counts, dict(self.ttfa.sums)), rtf=(self.rtf.counts, dict(self.rtf.sums)),
                    relay=(self.relay.counts, dict(self.relay.sums)), arrival=list(self.arrival),
                    requests=dict(self.requests), errors=dict(self.errors), audio_samples=self.audio_samples, **gauges)

    def merged(self, others: list[dict]) -> "Metrics":
        total = Metrics()
        total.frame_rate = self.frame_rate
        for snap in [self.snapshot()] + others:
            total.ttfa.merge(snap["ttfa"])
            total.rtf.merge(snap["rtf"])
            total.relay.merge(snap["relay"])
            total.arrival = [a + b for a, b in zip(total.arrival, snap["arrival"])]
            total.requests.update(snap["requests"])
            total.errors.update(snap["errors"])
            total.audio_samples += snap["audio_samples"]
        return total

    def arrived(self, now: float, taken: float, sent: list[float]) -> None:
        """A batch of chunks the engine sent at `sent` (those with audio), taken by the core's I/O thread at `taken`,
        read at `now`."""
        self.arrival[0] += len(sent) * now - sum(sent)
        self.arrival[1] += len(sent)
        self.arrival[2] += len(sent) * taken - sum(sent)

    def render(self, gauges: dict[str, tuple[str, float]], info: dict) -> str:
        """`info`: the engine's (its sample_rate and samples_per_frame)."""
        frames = self.audio_samples // info["samples_per_frame"]
        window = f"over the last {self.frame_rate.window:.0f} s of scrapes"
        lines = _family("tts_frames_per_second", "gauge", f"codec frames generated per second ({window})",
                        [f"tts_frames_per_second {self.frame_rate.update(frames):.3f}"])
        for name, (text, value) in gauges.items():
            lines += _family(name, "gauge", text, [f"{name} {value:g}"])
        lines += _family("tts_frames_total", "counter", "codec frames generated (80 ms of audio each)",
                         [f"tts_frames_total {frames}"])
        lines += _family("tts_audio_seconds_total", "counter", "audio generated",
                         [f"tts_audio_seconds_total {self.audio_samples / info['sample_rate']:.3f}"])
        lines += _family("tts_requests_total", "counter", "engine requests started",
                         [f'tts_requests_total{{api="{api}"}} {n}' for api, n in sorted(self.requests.items())])
        lines += _family("tts_errors_total", "counter", "errors sent to clients",
                         [f'tts_errors_total{{code="{code}"}} {n}' for code, n in sorted(self.errors.items())])
        lines += _family("tts_time_to_first_audio_seconds", "histogram",
                         "first text of an utterance to its first audio", self.ttfa.render("tts_time_to_first_audio_seconds", "api"))
        lines += _family("tts_real_time_factor", "histogram",
                         "per utterance: generation time after its first chunk / the audio after it",
                         self.rtf.render("tts_real_time_factor", "api"))
        lines += _family("tts_chunk_relay_seconds", "histogram",
                         "per chunk: from the engine's send to its context taking it (IPC, the front end's event "
                         "loop, and a reader's own wait: a slow HTTP body)",
                         self.relay.render("tts_chunk_relay_seconds", "api"))
        lines += _family("tts_chunk_arrival_seconds", "summary",
                         "per chunk: from the engine's send to the front end reading it (the relay's first part)",
                         [f"tts_chunk_arrival_seconds_sum {self.arrival[0]:.6f}",
                          f"tts_chunk_arrival_seconds_count {self.arrival[1]}"])
        lines += _family("tts_chunk_core_seconds", "summary",
                         "per chunk: from the engine's send to the engine core joining it into its batch (the arrival's "
                         "first part)", [f"tts_chunk_core_seconds_sum {self.arrival[2]:.6f}",
                                         f"tts_chunk_core_seconds_count {self.arrival[1]}"])
        return "\n".join(lines) + "\n"


def _family(name: str, kind: str, text: str, samples: list[str]) -> list[str]:
    return [f"# HELP {name} {text}", f"# TYPE {name} {kind}", *samples]
