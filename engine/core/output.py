"""Frames on their way to the listeners. Audio is read a step late when it can wait, so the host runs ahead."""
import itertools
from collections import deque

import numpy as np

from engine.api.request import AudioChunk
from engine.models.base import AudioFormat


class AudioOut:
    def __init__(self, scheduler, audio: AudioFormat, clock, read_later_from: int = 64):
        self.scheduler, self.audio, self.clock, self.read_later_from = scheduler, audio, clock, read_later_from
        self.in_flight: deque = deque()
        self.fresh = False

    def add(self, streams: list, kept: list[bool], copy) -> None:
        for s in itertools.compress(streams, kept):
            s.unread += 1
        self.in_flight.append((streams, kept, copy))
        self.fresh = True

    def drop(self) -> None:
        for streams, kept, _ in self.in_flight:
            for s in itertools.compress(streams, kept):
                s.unread -= 1
        self.in_flight.clear()
        self.fresh = False

    def _can_wait(self, streams: list, margin_s: float) -> bool:
        now = self.clock.monotonic()
        return len(streams) >= self.read_later_from or all(s.ahead_s(now) >= margin_s for s in streams)

    def flush(self, margin_s: float, first: int = 1) -> None:
        keep = int(self.fresh and self._can_wait(self.in_flight[-1][0], margin_s))
        self.fresh = False
        while len(self.in_flight) > keep:
            streams, kept, copy = self.in_flight.popleft()
            codes, pcm = copy.wait()
            for s, row, audio in itertools.compress(zip(streams, codes, pcm), kept):
                s.unread -= 1
                s.pending.append((row, audio))
        self.send(margin_s, first)

    def send(self, margin_s: float, first: int = 1) -> None:
        now = self.clock.monotonic()
        for s in list(self.scheduler.running):
            if not s.should_send(now, margin_s, first):
                continue
            n = min(len(s.pending), s.chunk_size(first))
            frames, s.pending = s.pending[:n], s.pending[n:]
            final = bool(s.finish_reason) and not s.pending and not s.unread
            start = s.frames - s.unread - len(s.pending) - n
            s.chunks += 1
            if s.first_sent_at is None:
                s.first_sent_at = now
            s.sent_samples += n * self.audio.samples_per_frame
            codes = np.stack([f[0] for f in frames]) if frames else np.zeros((0, self.audio.num_codebooks), np.int64)
            audio = np.concatenate([f[1] for f in frames]) if frames else np.zeros(0, np.float32)
            s.handle.deliver(AudioChunk(audio, codes, start, start * self.audio.samples_per_frame, final,
                                        s.finish_reason if final else None, now))
            if final:
                self.scheduler.finish(s, s.finish_reason)
