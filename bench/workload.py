"""The benchmark workload: texts of 20-500 characters, English words cut to length (0.8 frames per character) or
whole sentences of one of the ten languages (bench/languages.py)."""
import random

from bench.languages import CHARACTER_PIECES, sentences

WORDS = ("the voice agent answers every question about the weather, trains, flights and hotels while the "
         "listener waits patiently for a clear and friendly reply that sounds natural and calm").split()


def make_text(chars: int, rng: random.Random) -> str:
    words = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words)[:chars].rstrip() + "."


def texts(n: int, seed: int = 0, min_chars: int = 20, max_chars: int = 500, lang: str | None = None) -> list[str]:
    """n texts of a length drawn from min_chars..max_chars: English words (lang None), else one to several of the
    language's sentences, within the bounds where its sentences allow."""
    rng = random.Random(seed)
    if lang is None:
        return [make_text(rng.randint(min_chars, max_chars), rng) for _ in range(n)]
    pool, out = sentences(lang, 200, seed), []
    for _ in range(n):
        target, text = rng.randint(min_chars, max_chars), ""
        while len(text) < target:
            sentence = rng.choice(pool)
            if text and len(text) + len(sentence) > max_chars:
                break
            text += ("" if lang in CHARACTER_PIECES or not text else " ") + sentence
        out.append(text)
    return out


def workload(n: int, seed: int = 0, min_chars: int = 20, max_chars: int = 500) -> list[tuple[str, int]]:
    """n (text, frames) pairs; frames = 0.8 per character."""
    return [(text, max(1, round(0.8 * len(text)))) for text in texts(n, seed, min_chars, max_chars)]
