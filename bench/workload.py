"""The benchmark workload: mixed texts of 20-500 characters with forced lengths (0.8 frames per character)."""
import random

WORDS = ("the voice agent answers every question about the weather, trains, flights and hotels while the "
         "listener waits patiently for a clear and friendly reply that sounds natural and calm").split()


def make_text(chars: int, rng: random.Random) -> str:
    words = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words)[:chars].rstrip() + "."


def workload(n: int, seed: int = 0, min_chars: int = 20, max_chars: int = 500) -> list[tuple[str, int]]:
    """n (text, frames) pairs; frames = 0.8 per character."""
    rng = random.Random(seed)
    items = []
    for _ in range(n):
        text = make_text(rng.randint(min_chars, max_chars), rng)
        items.append((text, max(1, round(0.8 * len(text)))))
    return items
