"""/metrics sampled while a level runs, for the gauges a scrape after it sees only at their idle end: each one's
spread (p10, p50, p90, max) over the samples, and how many scrapes failed (a slow /metrics under load)."""
import threading
import urllib.request

import numpy as np

GAUGES = ("tts_engine_step_ms", "tts_engine_step_capacity_streams", "tts_generating_requests", "tts_queued_requests",
          "tts_aligner_capacity", "tts_aligner_used", "tts_aligner_queued_jobs", "tts_aligner_cost_ms_per_audio_s")


def parse(text: str, names=GAUGES) -> dict[str, float]:
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in names:
            values[name] = float(value)
    return values


class MetricsWatch:
    def __init__(self, http_url: str, period_s: float = 1.0):
        self.url, self.period_s = f"{http_url}/metrics", period_s
        self.samples: list[dict[str, float]] = []
        self.missed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "MetricsWatch":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.stop.wait(self.period_s):
            try:
                with urllib.request.urlopen(self.url, timeout=5.0) as response:
                    self.samples.append(parse(response.read().decode()))
            except OSError:                  # a missing sample, counted, not a failed level
                self.missed += 1

    def summary(self) -> dict:
        out = dict(samples=len(self.samples), missed=self.missed)
        for name in GAUGES:
            values = [s[name] for s in self.samples if name in s]
            if values:
                out[name] = [round(float(v), 4) for v in (*np.percentile(values, [10, 50, 90]), max(values))]
        return out
