"""Barge-in: how much of a context's text was spoken when playback stopped at `played` seconds.

Spoken are the words that end at or before `played`, plus the word being played if more than half of it was
(played - start > (end - start) / 2). The spoken text runs from the context's first character to the end of the
last spoken word; the rest (from the character after it) is unspoken. Before the first word's midpoint: nothing."""
from dataclasses import dataclass

from .align import Word


@dataclass
class Spoken:
    text: str           # text[:until]
    until: int          # spoken_until_char
    rest: str           # text[until:]


def spoken_until(words: list[Word], played: float) -> int:
    """`words` in order (times from the context's first sample) -> the end of the last spoken word, or 0."""
    until = 0
    for w in words:
        if w.end <= played or played - w.start > (w.end - w.start) / 2:
            until = w.char_end
        else:
            break
    return until


def spoken(text: str, words: list[Word], played: float) -> Spoken:
    until = spoken_until(words, played)
    return Spoken(text[:until], until, text[until:])
