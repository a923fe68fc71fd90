"""Streaming word timestamps for one context: which words are settled, given its text and audio so far.
A word settles once it is not the text's last unit and ends `margin` s before its window's audio (GUARD in an
utterance's opening window, whose words a player reaches first); never resent."""
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from engine.models.qwen3_tts import SAMPLE_RATE as RATE     # the default only: a front end passes info["sample_rate"]

from .text import Unit, Word, segment

MIN_SAMPLES = 240   # one mel frame at 16 kHz: less cannot be aligned
GUARD = 0.16        # provisional words end this long before their audio
UNITS_PER_S, CHARS_PER_S = 10, 30   # faster than anyone speaks
PACE = 1.5          # bounds a window's text once the context's own pace is known
PACE_SPAN = 2.0
MAX_GAP = 0.25      # a longer pause does not slow the pace a window's text is bounded by


@dataclass
class Job:
    audio: np.ndarray          # 24 kHz
    units: list[Unit]          # spans into the context's text
    start: float               # window start, s from the context's first sample
    final: bool                # every unit settles
    whole: bool                # its last unit is a whole word
    margin: float              # a word settles ending at least this long before the window's audio ends


@dataclass
class _Utterance:
    index: int
    time: float                # seconds from the context's first sample
    buffer: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))   # its audio from `head` on
    head: int = 0              # where the window starts in buffer
    length: int = 0
    window: int = 0            # samples from the utterance's start
    aligned: int = 0           # the utterance's samples when its last job was made
    text_end: int | None = None

    def add(self, pcm: np.ndarray) -> None:
        """A full buffer is replaced, never overwritten, so a job's view of the window stays valid."""
        end = self.head + self.length
        if end + len(pcm) > len(self.buffer):
            grown = np.empty(max(2 * (self.length + len(pcm)), 48000), np.float32)   # the window's, not all
            grown[:self.length] = self.buffer[self.head:end]
            self.buffer, self.head, end = grown, 0, self.length
        self.buffer[end:end + len(pcm)] = pcm
        self.length += len(pcm)

    def audio(self) -> np.ndarray:
        return self.buffer[self.head:self.head + self.length]

    def cut(self, samples: int) -> None:
        self.head, self.length, self.window = self.head + samples, self.length - samples, self.window + samples


class WordStream:
    def __init__(self, language: str = "auto", margin: float = 0.32, lookahead: float = 1.0, batch: float = 8.0,
                 step: float = 0.24, min_audio: float = 0.9, opening_audio: float = 0.5, opening: float = 2.0,
                 rate: int = RATE):
        """Windows starting in an utterance's first `opening` s (its words are played soonest) need `opening_audio`."""
        self.language, self.margin, self.lookahead, self.rate = language, margin, lookahead, rate
        self.batch, self.step, self.min_audio = int(batch * rate), int(step * rate), int(min_audio * rate)
        self.opening_audio, self.opening = int(opening_audio * rate), int(opening * rate)
        self.text = ""
        self.bounds: list[int] = []          # where each closed utterance's text ends
        self.words: list[Word] = []          # settled
        self.provisional: list[Word] = []    # the last alignment's unsettled words
        self.utterances = deque([_Utterance(0, 0.0)])   # head: being aligned; tail: receiving audio
        self.settled_char = 0                # end of the last settled word
        self.covered_s = 0.0                 # the known words (settled and provisional) are all up to here

    def add_text(self, text: str) -> None:
        self.text += text

    def close_utterance(self) -> None:
        self.bounds.append(len(self.text))

    def add_audio(self, pcm: np.ndarray) -> None:
        self.utterances[-1].add(pcm)

    def end_audio(self) -> None:
        u = self.utterances[-1]
        u.text_end = self._text_end(u.index)
        self.utterances.append(_Utterance(u.index + 1, u.time + (u.window + u.length) / self.rate))

    @property
    def owes_words(self) -> bool:
        """An utterance whose audio ended has words not settled yet."""
        return self.utterances[0].text_end is not None

    @property
    def settled_time(self) -> float:
        u = self.utterances[0]
        return u.time + u.window / self.rate

    def due_in(self, played_s: float) -> float:
        return self.settled_time - self.lookahead - played_s

    def ready(self, played_s: float = 0.0) -> bool:
        u = self.utterances[0]
        if u.text_end is not None:
            return True
        fresh = u.window + u.length - u.aligned
        least = self.min_audio if u.window >= self.opening else min(self.min_audio, self.opening_audio)
        return u.length >= least and fresh >= max(self.step, u.length - fresh) and \
            (fresh >= self.batch or self.due_in(played_s) <= 0)

    def job(self, played_s: float = 0.0, force: bool = False) -> Job | None:
        """`force`: a job for the audio come since the last one, ready or not (a barge-in's words)."""
        u = self.utterances[0]
        if not (self.ready(played_s) or force and u.length >= MIN_SAMPLES and u.window + u.length > u.aligned):
            return None
        final = u.text_end is not None
        start = max(self.settled_char, self.bounds[u.index - 1] if u.index else 0)
        end = u.text_end if final else self._text_end(u.index)
        units = [Unit(x.text, x.start + start, x.end + start) for x in segment(self.text[start:end], self.language)]
        whole = final or len(self.bounds) > u.index
        if not final:
            seconds, pace = u.length / self.rate, self.pace()
            chars = 20 + CHARS_PER_S * seconds if pace is None else 8 + min(CHARS_PER_S, PACE * pace) * seconds
            reach = [x for x in units[:4 + int(UNITS_PER_S * seconds)] if x.end - start <= chars]
            units, whole = reach, whole or len(reach) < len(units)
        u.aligned = u.window + u.length
        job = Job(u.audio(), units, u.time + u.window / self.rate, final, whole,
                  self.margin if u.window >= self.opening else min(self.margin, GUARD))
        if final and (not units or u.length < MIN_SAMPLES):   # nothing to align: settle at once
            self.apply(job, [(0.0, 0.0)] * len(units))
            return self.job(played_s, force)
        return job if units else None

    def apply(self, job: Job, spans: list[tuple[float, float]]) -> list[Word]:
        u, duration = self.utterances[0], len(job.audio) / self.rate
        words = [Word(self.text[x.start:x.end], job.start + min(s, duration), job.start + min(e, duration),
                      x.start, x.end) for x, (s, e) in zip(job.units, spans)]
        n = len(words)
        if not job.final:
            limit, n = job.start + duration - job.margin, 0
            while n < len(words) - (not job.whole) and words[n].end <= limit:
                n += 1
        settled, rest = words[:n], words[n:]
        self.words += settled
        self.provisional = [w for w in rest if w.end <= job.start + duration - GUARD]
        self.covered_s = max(self.covered_s, job.start + duration - (0.0 if job.final else GUARD))
        if settled:
            self.settled_char = settled[-1].char_end
        if job.final:
            self.utterances.popleft()
        elif settled:
            cut = min(u.length, max(0, round((settled[-1].end - job.start) * self.rate)))
            u.cut(cut)
        return settled

    def pace(self) -> float | None:
        """Characters per second of audio over the last settled words (a word and what follows it, from its start to
        the next word's, a pause counted up to MAX_GAP), or None."""
        words = self.words[-32:]
        pairs = list(zip(words, words[1:]))
        seconds = sum(min(b.start - a.start, a.end - a.start + MAX_GAP) for a, b in pairs)
        return sum(b.char_start - a.char_start for a, b in pairs) / seconds if seconds >= PACE_SPAN else None

    def known_words(self) -> list[Word]:
        return self.words + self.provisional

    def _text_end(self, index: int) -> int:
        return self.bounds[index] if len(self.bounds) > index else len(self.text)
