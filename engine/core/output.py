"""Frames on their way to the listeners. Audio is read a step late when it can wait, so the host runs ahead."""
import itertools
from collections import deque

import numpy as np

from engine.api.request import AudioChunk
from engine.core.playout import first_chunk_frames, margin_s
from engine.models.base import AudioFormat


class AudioOut:
    def __init__(self, scheduler, audio: AudioFormat, clock, read_later_from: int = 64):
        self.scheduler, self.audio, self.clock, self.read_later_from = scheduler, audio, clock, read_later_from
        self.in_flight: deque = deque()
        self.fresh = False
        self.dry = 0          # chunks that reached a listener with nothing left to play while its text was ready

    def add(self, streams: list, kept: list[bool], copy) -> None:
        for s in itertools.compress(streams, kept):
            s.playout.unread += 1
        self.in_flight.append((streams, kept, copy))
        self.fresh = True

    def drop(self) -> None:
        for streams, kept, _ in self.in_flight:
            for s in itertools.compress(streams, kept):
                s.playout.unread -= 1
        self.in_flight.clear()
        self.fresh = False

    def _can_wait(self, streams: list, margin: float) -> bool:
        now = self.clock.monotonic()
        return len(streams) >= self.read_later_from or all(s.playout.ahead_s(now) >= margin for s in streams)

    def flush(self, step_s: float, admitted: int) -> None:
        """After a step that took `step_s` and admitted `admitted` streams."""
        margin = margin_s(step_s)
        first = first_chunk_frames(step_s, self.audio.frame_s, admitted, self.scheduler.admitting())
        keep = int(self.fresh and self._can_wait(self.in_flight[-1][0], margin))
        self.fresh = False
        while len(self.in_flight) > keep:
            streams, kept, copy = self.in_flight.popleft()
            codes, pcm = copy.wait()
            for s, row, audio in itertools.compress(zip(streams, codes, pcm), kept):
                s.playout.unread -= 1
                s.playout.unsent.append((row, audio))
        self.send(margin, first)

    def send(self, margin: float, first: int = 1, heard_only: bool = False) -> None:
        """`heard_only`: to listeners already playing (a first chunk must outlast the next step's wait)."""
        now = self.clock.monotonic()
        for s in list(self.scheduler.running):
            playout, generated = s.playout, s.finish_reason is not None
            if heard_only and not playout.listener.started or not playout.should_send(now, margin, first, generated):
                continue
            if playout.listener.started and playout.buffered_s(now) <= 0 and s.text.ready():
                self.dry += 1
            frames = playout.take(first, now)
            final = generated and not playout.unsent and not playout.unread
            start = s.frames - playout.unread - len(playout.unsent) - len(frames)
            codes = np.stack([f[0] for f in frames]) if frames else np.zeros((0, self.audio.num_codebooks), np.int64)
            audio = np.concatenate([f[1] for f in frames]) if frames else np.zeros(0, np.float32)
            chunk = AudioChunk(audio, codes, start, start * self.audio.samples_per_frame, final,
                               s.finish_reason if final else None, now)
            if final:
                self.scheduler.finish(s, s.finish_reason, chunk)
            else:
                s.handle.deliver(chunk)
