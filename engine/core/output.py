"""Frames on their way to the listeners. Audio is read a step late when it can wait, so the host runs ahead. Which
streams may send is found over the batch in slot-indexed arrays; only those are checked one by one."""
import itertools
from collections import deque

import numpy as np

from engine.api.request import UnjoinedChunk
from engine.core.playout import first_chunk_frames, margin_s
from engine.models.base import AudioFormat


class AudioOut:
    def __init__(self, scheduler, audio: AudioFormat, clock, read_later_from: int = 64):
        self.scheduler, self.audio, self.clock, self.read_later_from = scheduler, audio, clock, read_later_from
        self.in_flight: deque = deque()
        self.fresh = False
        self.dry = 0          # chunks that reached a listener with nothing left to play while its text was ready
        # first chunks sent, and their streams' seconds from arrival to a slot and from the slot to that chunk
        self.first_chunks, self.to_slot_s, self.to_first_chunk_s = 0, 0.0, 0.0
        slots = scheduler.max_active + 1
        # per slot, never below the truth: frames read and not sent; frames the next chunk needs at least; when the
        # listener's audio ends (inf: not started, or chunks not adaptive)
        self.unsent, self.need = np.zeros(slots, np.int64), np.zeros(slots, np.int64)
        self.ends = np.full(slots, np.inf)

    def start(self, streams: list) -> None:
        """Streams that just took their slots."""
        for s in streams:
            self._mirror(s)

    def _mirror(self, s) -> None:
        playout, listener = s.playout, s.playout.listener
        self.unsent[s.slot], self.need[s.slot] = len(playout.unsent), playout.chunk_size()
        self.ends[s.slot] = listener.started_at + listener.sent_samples / listener.sample_rate \
            if listener.started and playout.adaptive else np.inf

    def add(self, streams: list, kept: list[bool], copy) -> None:
        for s in itertools.compress(streams, kept):
            s.playout.unread += 1
        slots = np.fromiter((s.slot for s in itertools.compress(streams, kept)), np.int64)
        self.in_flight.append((streams, kept, copy, slots))
        self.fresh = True

    def drop(self) -> None:
        for streams, kept, _, _ in self.in_flight:
            for s in itertools.compress(streams, kept):
                s.playout.unread -= 1
        self.in_flight.clear()
        self.fresh = False

    def _can_wait(self, streams: list, margin: float) -> bool:
        now = self.clock.monotonic()
        return len(streams) >= self.read_later_from or all(s.playout.ahead_s(now) >= margin for s in streams)

    def flush(self, step_s: float, admitted: int, final: bool = True, behind_turn=None) -> None:
        """After a step that took `step_s` and admitted `admitted` streams; not `final`: within it, before a side
        turn (a newest copy kept now is weighed again at the step's end); `behind_turn`: the step's copy queued after
        a side turn, kept a step rather than waited for (a turn's reserve counts on that)."""
        margin = margin_s(step_s)
        first = first_chunk_frames(step_s, self.audio.frame_s, admitted, self.scheduler.admitting())
        newest = self.in_flight[-1][2] if self.fresh else None
        keep = int(newest is not None and not newest.ready() and
                   (newest is behind_turn or self._can_wait(self.in_flight[-1][0], margin)))
        self.fresh = bool(keep) and not final
        while len(self.in_flight) > keep:
            streams, kept, copy, slots = self.in_flight.popleft()
            codes, pcm = copy.wait()
            for s, row, audio in itertools.compress(zip(streams, codes, pcm), kept):
                s.playout.unread -= 1
                s.playout.unsent.append((row, audio))
            self.unsent[slots] += 1
        self.send(margin, first)

    def send(self, margin: float, first: int = 1, heard_only: bool = False) -> None:
        """`heard_only`: to listeners already playing (a first chunk must outlast the next step's wait)."""
        now = self.clock.monotonic()
        for s in self._candidates(now, margin):
            playout, generated = s.playout, s.finish_reason is not None
            if heard_only and not playout.listener.started or not playout.should_send(now, margin, first, generated):
                self._mirror(s)
                continue
            if playout.listener.started and playout.buffered_s(now) <= 0 and s.text.ready():
                self.dry += 1
            if not playout.chunks and playout.unsent:      # a stream that ends before a frame sends no first audio
                self.first_chunks += 1
                self.to_slot_s += s.started_at - s.arrived_at
                self.to_first_chunk_s += now - s.started_at
            frames = playout.take(first, now)
            final = generated and not playout.unsent and not playout.unread
            start = s.frames - playout.unread - len(playout.unsent) - len(frames)
            chunk = UnjoinedChunk(frames, start, start * self.audio.samples_per_frame, final,
                                  s.finish_reason if final else None, now) if frames else None   # None: an empty end
            if final:
                self.scheduler.finish(s, s.finish_reason, chunk)
            else:
                self._mirror(s)
                s.handle.deliver(chunk)

    def _candidates(self, now: float, margin: float) -> list:
        """The running streams that may send: a chunk's frames read, a listener low, or generation over."""
        running = self.scheduler.running
        slots = np.fromiter((s.slot for s in running), np.int64, len(running))
        unsent = self.unsent[slots]
        may = (unsent >= self.need[slots]) | (unsent > 0) & (self.ends[slots] - now <= margin + 1e-9)
        for i, s in enumerate(running):
            if s.finish_reason is not None:
                may[i] = True
        return [running[i] for i in np.flatnonzero(may)]
