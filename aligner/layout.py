"""A batch in fixed-size rows, indices built on the host, so CUDA graphs can replay it."""
from dataclasses import dataclass

import numpy as np

from .audio_encoder import CHUNK, SLOTS, TOKENS, chunk_tokens

ROWS = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48]
WIDTHS = [256, 512, 1024]         # text row lengths with graphs
TEXT_TOKENS = 16384               # text rows x width of one forward with graphs


def bucket(rows: int) -> int:
    return next((b for b in ROWS if b >= rows), rows)


def text_width(longest: int) -> int:
    return next((w for w in WIDTHS if w >= longest), longest)


def place(free: list[int], size: int, capacity: int) -> tuple[int, int]:
    row = next((r for r, f in enumerate(free) if f >= size), len(free))
    if row == len(free):
        free.append(capacity)
    free[row] -= size
    return row, capacity - free[row] - size


def first_fit(sizes: list[int], capacity: int) -> tuple[list[tuple[int, int]], int]:
    free, where = [], [(0, 0)] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        where[i] = place(free, sizes[i], capacity)
    return where, len(free)


class Fit:
    rows, tokens = ROWS[-1], int(0.9 * TEXT_TOKENS)

    def __init__(self):
        self.free, self.used, self.longest = [], 0, 0

    def add(self, frames: int, length: int) -> bool:
        chunks = -(-frames // CHUNK)
        for c in range(0, chunks, SLOTS):
            place(self.free, min(SLOTS, chunks - c), SLOTS)
        self.used, self.longest = self.used + length, max(self.longest, length)
        return len(self.free) <= self.rows and self.longest <= WIDTHS[-1] and self.used <= self.tokens


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

    @classmethod
    def build(cls, frames: list[int], stride: int, ids: list[list[int]], audio_token: int,
              timestamp_token: int) -> "Layout":
        encoder, tokens = encoder_rows(frames, stride)
        text = text_rows(ids, tokens, audio_token, timestamp_token)
        return cls(*encoder, *text)


def encoder_rows(frames: list[int], stride: int):
    chunks = [[min(CHUNK, f - s) for s in range(0, f, CHUNK)] for f in frames]
    windows = [(i, c) for i, cs in enumerate(chunks) for c in range(0, len(cs), SLOTS)]
    place, rows = first_fit([len(chunks[i][c:c + SLOTS]) for i, c in windows], SLOTS)
    e = bucket(rows)
    mel_frames, conv_frames = np.full((e, SLOTS, CHUNK), -1), np.zeros((e, SLOTS), np.int64)
    token_window, tokens = np.full((e, SLOTS, TOKENS // SLOTS), -1), [[] for _ in frames]
    for w, ((i, c), (row, slot)) in enumerate(zip(windows, place)):
        for k, n in enumerate(chunks[i][c:c + SLOTS]):
            mel_frames[row, slot + k, :n] = i * stride + (c + k) * CHUNK + np.arange(n)
            conv_frames[row, slot + k] = n if frames[i] < CHUNK else CHUNK
            token_window[row, slot + k, :chunk_tokens(n)] = w
            first = (row * SLOTS + slot + k) * (TOKENS // SLOTS)
            tokens[i] += range(first, first + chunk_tokens(n))
    return (mel_frames, conv_frames, token_window.reshape(e, TOKENS)), tokens


def text_rows(ids: list[list[int]], tokens: list[list[int]], audio_token: int, timestamp_token: int):
    lengths = [len(x) for x in ids]
    width = text_width(max(lengths))
    place, rows = first_fit(lengths, width)
    r = bucket(rows)
    out = np.zeros((r, width), np.int64), np.zeros((r, width), np.int64), np.full((r, width), -1), \
        np.zeros((r, width), np.int64)
    stamps = []
    for i, (seq, (row, at)) in enumerate(zip(ids, place)):
        seq = np.asarray(seq)
        for array, values in zip(out, (seq, np.arange(len(seq)), i)):
            array[row, at:at + len(seq)] = values
        out[3][row, at + np.flatnonzero(seq == audio_token)] = tokens[i]
        stamps.append(row * width + at + np.flatnonzero(seq == timestamp_token))
    return *out, out[0] == audio_token, stamps
