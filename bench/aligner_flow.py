"""The gateway's word-timestamp job flow on a simulated clock, deterministically: closed-loop contexts stream text as
load_bench sends it, the engine's chunks come at `rtf` x real time, each context's WordStream makes jobs as LiveWords
does (paced by a real-time player from its first chunk), the real AlignmentService gathers and cuts the batches; a
batch takes `forward_s(items)`, and a speaker's times who says the text evenly answer it."""
import heapq
import itertools
import math
import random
from dataclasses import dataclass, field

import numpy as np

from aligner import AlignmentService, WordStream
from aligner.speaker_times import CHAR_S, CJK_S
from aligner.text import segment
from bench.languages import pieces, sentences
from bench.workload import texts

RATE, FRAME = 24000, 1920
CHUNKS = [2, 2, 4, 8, 16]          # the engine's chunk frames at load (the first of 2: streams admitted together)
MARGIN_S = 0.3                     # a listener with less audio buffered gets the frames made at once


@dataclass
class Pace:
    """How a context's text comes (characters a piece, or the language's pieces; ms between pieces) and is said."""
    language: str
    chars: int | None
    ms: tuple[int, int]
    char_s: float                  # seconds of speech a character


PACES = {"en4x15": Pace("english", 4, (15, 15), CHAR_S), "en3x20": Pace("english", 3, (20, 20), CHAR_S),
         "zh": Pace("chinese", None, (20, 30), CJK_S)}


def even_speaker(text: str, seconds: float, language: str = "english", swing: float = 0.0,
                 seed: int = 0) -> dict[int, tuple[float, float]]:
    """True (start, end) per unit (keyed by its span start): the text said over `seconds`, each unit taking its
    characters' share and one more character's worth of pause after it; `swing`: the pace goes up and down by this
    share over ~12 units (evenly at 0)."""
    units = segment(text, language)
    phase = random.Random(seed).uniform(0, 2 * math.pi)
    shares = np.array([(len(u.text) + 1) * (1 + swing * math.sin(phase + 2 * math.pi * i / 12))
                       for i, u in enumerate(units)])
    per_share = seconds / max(1e-9, shares.sum())
    starts = np.cumsum(np.concatenate([[0.0], shares[:-1]])) * per_share
    return {u.start: (float(a), float(a + w * per_share * len(u.text) / (len(u.text) + 1)))
            for u, a, w in zip(units, starts, shares)}


def stand_in(job, truth, rate: int = RATE) -> list[tuple[float, float]]:
    """What an aligner answers for the window: spoken words at their times; the rest crammed at the window's end."""
    dur = len(job.audio) / rate
    end = job.start + dur
    return [(dur, dur) if truth[u.start][1] > end else (max(0.0, truth[u.start][0] - job.start),
                                                         truth[u.start][1] - job.start) for u in job.units]


@dataclass
class Context:
    text: str
    pace: Pace
    start: float
    stream: WordStream
    frames: int
    truth: dict
    started: float | None = None   # the player's start: the first chunk
    busy: bool = False
    timer: int = 0                 # the due timer that counts
    audio_done: bool = False
    left_out: int = 0              # units spoken in a window that its job's text left out
    done: bool = False
    leads: list = field(default_factory=list)


class Flow:
    def __init__(self, pace: Pace, concurrency: int, duration: float, forward_s, rtf: float = 0.75,
                 ramp: float = 6.0, ttfa: float = 0.15, seed: int = 0, stream_options: dict | None = None,
                 swing: float = 0.0, **service_options):
        self.pace, self.concurrency, self.duration, self.forward_s = pace, concurrency, duration, forward_s
        self.rtf, self.ramp, self.ttfa, self.options, self.swing = rtf, ramp, ttfa, stream_options or {}, swing
        self.now, self.events, self.order = 0.0, [], itertools.count()
        self.rng = random.Random(seed)
        self.texts = itertools.cycle(texts(512, seed) if pace.language == "english" else
                                     ["".join(self.rng.sample(sentences("zh", 60, seed), 3)) for _ in range(64)])
        self.service = AlignmentService(None, clock=self, **service_options)
        self.jobs, self.contexts, self.running, self.gathering = {}, [], False, None
        self.batches: list[list] = []

    def monotonic(self) -> float:
        return self.now

    def at(self, t: float, fn, *args) -> None:
        heapq.heappush(self.events, (t, next(self.order), fn, args))

    def run(self) -> "Flow":
        for slot in range(self.concurrency):
            self.at(slot * self.ramp / self.concurrency, self.begin)
        while self.events:
            self.now, _, fn, args = heapq.heappop(self.events)
            fn(*args)
        return self

    def begin(self) -> None:
        """A slot's next context: its text in pieces, its audio in the engine's chunks."""
        text = next(self.texts)
        frames = max(1, round(len(text) * self.pace.char_s * RATE / FRAME))
        ctx = Context(text, self.pace, self.now, WordStream(self.pace.language, **self.options), frames,
                      even_speaker(text, frames * FRAME / RATE, self.pace.language, self.swing, len(self.contexts)))
        self.contexts.append(ctx)
        t, arrived, lo_hi = self.now, [], self.pace.ms
        cuts = [text[i:i + self.pace.chars] for i in range(0, len(text), self.pace.chars)] if self.pace.chars \
            else pieces(text, "zh", self.rng)
        for k, piece in enumerate(cuts):
            self.at(t, self.text, ctx, piece, k == len(cuts) - 1)
            arrived += [t] * len(piece)
            t += self.rng.randint(*lo_hi) / 1000
        ready, made = [], self.now + self.ttfa
        for k in range(frames):           # a frame is made once the text it says (and a word beyond) has come
            needed = arrived[min(len(text) - 1, int((k + 1) * FRAME / RATE / self.pace.char_s) + 6)]
            made = max(made + (self.rtf * FRAME / RATE if k else 0.0), needed)
            ready.append(made)
        self.schedule_chunks(ctx, ready)

    def schedule_chunks(self, ctx: Context, ready: list[float]) -> None:
        """A chunk goes when it has its frames, or at once when the listener would have less than MARGIN_S."""
        unsent, sent, chunks, first = 0, 0, 0, None
        for k, t in enumerate(ready):
            unsent += 1
            last = k == len(ready) - 1
            short = first is not None and sent * FRAME / RATE - (t - first) < MARGIN_S
            if unsent >= CHUNKS[min(chunks, len(CHUNKS) - 1)] or last or short:
                self.at(t, self.audio, ctx, unsent, last)
                first = t if first is None else first
                sent, unsent, chunks = sent + unsent, 0, chunks + 1

    def text(self, ctx: Context, piece: str, last: bool) -> None:
        ctx.stream.add_text(piece)
        if last:
            ctx.stream.close_utterance()
            self.poke(ctx)

    def audio(self, ctx: Context, frames: int, final: bool) -> None:
        ctx.started = self.now if ctx.started is None else ctx.started
        ctx.stream.add_audio(np.zeros(frames * FRAME, np.float32))
        if final:
            ctx.stream.end_audio()
            ctx.audio_done = True
        self.poke(ctx)

    def poke(self, ctx: Context, timer: int | None = None) -> None:
        """LiveWords' loop: the next job, else a wait for new input or for playback to make one due."""
        if ctx.busy or ctx.done or timer is not None and timer != ctx.timer:
            return
        ctx.timer += 1
        played = self.now - ctx.started if ctx.started is not None else 0.0
        job = ctx.stream.job(played)
        if job is not None:
            ctx.busy = True
            future = self.service.submit(job.audio, [u.text for u in job.units], ctx.started + job.start)
            self.jobs[id(future)] = (ctx, job)
            return self.wake()
        if ctx.audio_done and not ctx.stream.owes_words:     # its words are out: the slot's next context
            ctx.done = True
            return self.begin() if self.now < self.duration else None
        due = ctx.stream.due_in(played) if ctx.started is not None else None
        if due and due > 0:
            self.at(self.now + max(due, 1e-6), self.poke, ctx, ctx.timer)   # a float step past now

    def wake(self) -> None:
        """The service's thread: gathers from the first job it takes, then cuts a batch and runs it."""
        if self.running:
            return
        jobs = self.service.queue
        while jobs.take():
            pass
        if not jobs.waiting:
            return
        if self.gathering is None:
            self.gathering = jobs.gather_until(self.now)
        deadline = min(jobs.waiting[0][0] - jobs.gather_margin, self.gathering)
        if self.now < deadline and len(jobs.waiting) <= jobs.max_batch:
            self.at(deadline, self.wake)
            return
        batch, self.gathering, self.running = jobs.cut(self.service.batch_samples()), None, True
        self.batches.append([self.jobs[id(item[2])] for item in batch])
        self.at(self.now + self.forward_s([(item[0], item[1]) for item in batch]), self.answered, batch)

    def answered(self, batch: list) -> None:
        self.running = False
        for item in batch:
            ctx, job = self.jobs.pop(id(item[2]))
            ctx.busy = False
            end, ours = job.start + len(job.audio) / RATE, {u.start for u in job.units}
            ctx.left_out += sum(c >= job.units[0].start and c not in ours and e <= end
                                for c, (_, e) in ctx.truth.items())
            ctx.leads += [ctx.started + w.end - self.now for w in ctx.stream.apply(job, stand_in(job, ctx.truth))]
            self.poke(ctx)
        self.wake()
