"""A batch in fixed-size rows, indices built on the host, so CUDA graphs can replay it."""
from bisect import bisect_left
from dataclasses import dataclass

import numpy as np

from .audio_encoder import CHUNK, SLOTS, TOKENS, chunk_tokens

ROWS = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48]
WIDTHS = [256, 512, 1024]         # text row lengths with graphs
TEXT_TOKENS = 16384               # text rows x width of one forward with graphs


def bucket(rows: int) -> int:
    i = bisect_left(ROWS, rows)
    return ROWS[i] if i < len(ROWS) else rows


def text_width(longest: int) -> int:
    return next((w for w in WIDTHS if w >= longest), longest)


def captured(rows: int, width: int | None = None) -> bool:
    """Whether the encoder's `rows` (or the text's rows x `width`) have CUDA graphs."""
    return rows <= ROWS[-1] if width is None else \
        rows <= ROWS[-1] and width in WIDTHS and bucket(rows) * width <= TEXT_TOKENS


def window_chunks(frames: int) -> list[int]:
    """Chunks of each attention window of one audio of `frames` mel frames."""
    chunks = -(-frames // CHUNK)
    return [min(SLOTS, chunks - c) for c in range(0, chunks, SLOTS)]


class Rows:
    """First fit in arrival order into rows of `capacity`: (row, offset) of each item."""

    def __init__(self, capacity: int):
        self.capacity, self.free, self.where = capacity, [], []

    def __len__(self) -> int:
        return len(self.free)

    def add(self, size: int) -> None:
        row = next((r for r, f in enumerate(self.free) if f >= size), len(self.free))
        if row == len(self.free):
            self.free.append(self.capacity)
        self.where.append((row, self.capacity - self.free[row]))
        self.free[row] -= size


class Fit:
    """A batch's rows as its jobs arrive: the planner asks whether a job fits, the builder takes the rows it made."""

    def __init__(self):
        self.encoder, self.lengths = Rows(SLOTS), []
        self.texts = {w: Rows(w) for w in WIDTHS}     # one packing per width a longer text would still allow

    def add(self, frames: int, length: int) -> bool:
        """False: with this job the batch needs a shape without graphs; then it is left without the job (the caller
        starts a new one), unless it was empty (a lone job too large for graphs runs eagerly)."""
        saved = self.texts, [(rows, rows.free[:], len(rows.where)) for rows in (self.encoder, *self.texts.values())]
        for size in window_chunks(frames):
            self.encoder.add(size)
        self.lengths.append(length)
        self.texts = {w: rows for w, rows in self.texts.items() if w >= length}
        for rows in self.texts.values():
            rows.add(length)
        if (fits := self.fits) or len(self.lengths) == 1:
            return fits
        self.texts, self.lengths = saved[0], self.lengths[:-1]
        for rows, free, n in saved[1]:
            rows.free, rows.where = free, rows.where[:n]
        return False

    @property
    def fits(self) -> bool:
        text = self.text()
        return captured(len(self.encoder)) and captured(len(text), text.capacity)

    def text(self) -> Rows:
        """The text rows the batch runs in: the width with graphs of fewest padded tokens, else the narrowest."""
        with_graphs = [rows for rows in self.texts.values() if captured(len(rows), rows.capacity)]
        if with_graphs:
            return min(with_graphs, key=lambda rows: (bucket(len(rows)) * rows.capacity, rows.capacity))
        width = text_width(max(self.lengths))
        if width not in self.texts:                   # longer than any graph's rows: packed once, for the build
            self.texts[width] = Rows(width)
            for length in self.lengths:
                self.texts[width].add(length)
        return self.texts[width]


@dataclass
class Layout:
    mel_frames: np.ndarray     # [E, SLOTS, CHUNK] column in the batch's mel (-1: zero)
    conv_frames: np.ndarray    # [E, SLOTS] frames the convs see (empty slot: 0)
    windows: np.ndarray        # [E, TOKENS] window (-1: none)
    ids: np.ndarray            # [R, width] (0: padding)
    positions: np.ndarray
    sequences: np.ndarray      # [R, width] sequence (-1: padding)
    audio_rows: np.ndarray     # [R, width] the encoder token an audio placeholder takes
    is_audio: np.ndarray       # [R, width]
    stamps: list[np.ndarray]   # per sequence: `<timestamp>` tokens, flat over R x width

    @property
    def captured(self) -> bool:
        """Every shape of the batch has graphs; else it runs eagerly throughout."""
        return captured(len(self.windows)) and captured(*self.ids.shape)

    @classmethod
    def build(cls, fit: Fit, frames: list[int], stride: int, ids: list[list[int]], audio_token: int,
              timestamp_token: int) -> "Layout":
        """In the rows `fit` packed these jobs in as the planner admitted them: the batch is packed once."""
        encoder, tokens = encoder_rows(frames, stride, fit.encoder)
        text = text_rows(ids, tokens, fit.text(), audio_token, timestamp_token)
        return cls(*encoder, *text)


def largest_first(jobs: list[int], samples: list[int]) -> list[int]:
    """The order a batch is packed in: first fit of the longest audio first leaves fewer encoder slots empty."""
    return sorted(jobs, key=lambda i: -samples[i])


def plan(frames: list[int], width: int, ids: list[list[int]], audio_token: int,
         timestamp_token: int) -> list[tuple[int, int, Layout]]:
    """A batch's jobs in arrival order -> (first, end, layout) of each forward that runs on graphs."""
    out, start, fit = [], 0, Fit()
    for i, (f, x) in enumerate(zip(frames, ids)):
        if not fit.add(f, len(x)) and i > start:
            out.append((start, i, fit))
            start, fit = i, Fit()
            fit.add(f, len(x))
    return [(a, b, Layout.build(fit, frames[a:b], width, ids[a:b], audio_token, timestamp_token))
            for a, b, fit in out + [(start, len(ids), fit)]]


def encoder_rows(frames: list[int], stride: int, rows: Rows):
    chunks = [[min(CHUNK, f - s) for s in range(0, f, CHUNK)] for f in frames]
    windows = [(i, c) for i, cs in enumerate(chunks) for c in range(0, len(cs), SLOTS)]
    e = bucket(len(rows))
    mel_frames, conv_frames = np.full((e, SLOTS, CHUNK), -1), np.zeros((e, SLOTS), np.int64)
    token_window, tokens = np.full((e, SLOTS, TOKENS // SLOTS), -1), [[] for _ in frames]
    for w, ((i, c), (row, slot)) in enumerate(zip(windows, rows.where)):
        for k, n in enumerate(chunks[i][c:c + SLOTS]):
            mel_frames[row, slot + k, :n] = i * stride + (c + k) * CHUNK + np.arange(n)
            conv_frames[row, slot + k] = n if frames[i] < CHUNK else CHUNK
            token_window[row, slot + k, :chunk_tokens(n)] = w
            first = (row * SLOTS + slot + k) * (TOKENS // SLOTS)
            tokens[i] += range(first, first + chunk_tokens(n))
    return (mel_frames, conv_frames, token_window.reshape(e, TOKENS)), tokens


def text_rows(ids: list[list[int]], tokens: list[list[int]], rows: Rows, audio_token: int, timestamp_token: int):
    r, width = bucket(len(rows)), rows.capacity
    out = np.zeros((r, width), np.int64), np.zeros((r, width), np.int64), np.full((r, width), -1), \
        np.zeros((r, width), np.int64)
    stamps = []
    for i, (seq, (row, at)) in enumerate(zip(ids, rows.where)):
        seq = np.asarray(seq)
        for array, values in zip(out, (seq, np.arange(len(seq)), i)):
            array[row, at:at + len(seq)] = values
        out[3][row, at + np.flatnonzero(seq == audio_token)] = tokens[i]
        stamps.append(row * width + at + np.flatnonzero(seq == timestamp_token))
    return *out, out[0] == audio_token, stamps
