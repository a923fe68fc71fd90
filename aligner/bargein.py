"""Barge-in: how much of a context's text was spoken when playback stopped (a word counts past its midpoint)."""
from dataclasses import dataclass

from .text import Word


@dataclass
class Spoken:
    text: str
    until: int          # spoken_until_char
    rest: str


def spoken_until(words: list[Word], played_s: float) -> int:
    until = 0
    for w in words:
        if w.end <= played_s or played_s - w.start > (w.end - w.start) / 2:
            until = w.char_end
        else:
            break
    return until


def spoken(text: str, words: list[Word], played_s: float) -> Spoken:
    until = spoken_until(words, played_s)
    return Spoken(text[:until], until, text[until:])
