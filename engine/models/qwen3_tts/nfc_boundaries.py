"""Where NFC can no longer change text that is still arriving: the characters that compose with a neighbour."""
import unicodedata


def _composition_pairs() -> tuple[frozenset[str], frozenset[str]]:
    first, second = set(), set()
    for cp in range(0x30000):                     # no canonical decomposition lies above
        d = unicodedata.decomposition(chr(cp))
        if d and d[0] != "<" and len(d.split()) == 2 and unicodedata.normalize("NFC", chr(cp)) == chr(cp):
            a, b = (chr(int(h, 16)) for h in d.split())
            first.add(a)
            second.add(b)
    # Hangul composes by rule, not by table: L + V -> LV, LV + T -> LVT
    first.update(map(chr, range(0x1100, 0x1113)), map(chr, range(0xAC00, 0xD7A4, 28)))
    second.update(map(chr, range(0x1161, 0x1176)), map(chr, range(0x11A8, 0x11C3)))
    return frozenset(first), frozenset(second)


COMPOSES_FORWARD, COMPOSES_BACKWARD = _composition_pairs()


def boundary_before(c: str) -> bool:
    """A starter nothing before it composes with: NFC of a text splits before it, whatever surrounds it."""
    head = unicodedata.normalize("NFD", c)[0]
    return unicodedata.combining(head) == 0 and c not in COMPOSES_BACKWARD and head not in COMPOSES_BACKWARD


def boundary_after(c: str) -> bool:
    """Nothing after it composes with it, and it holds no mark a later one may sort before (é + U+0323 is ẹ́)."""
    marks = any(map(unicodedata.combining, unicodedata.normalize("NFD", c)))
    return not marks and c not in COMPOSES_FORWARD and unicodedata.is_normalized("NFC", c)


def settled_span(text: str, start: int, most: int) -> str:
    """The longest text[start:j] (at most `most` characters) that NFC leaves as it is, whatever text is appended."""
    if start >= len(text) or not boundary_before(text[start]):
        return ""
    j = min(len(text), start + most)
    while j > start and not (boundary_before(text[j]) if j < len(text) else boundary_after(text[-1])):
        j -= 1
    span = text[start:j]
    return span if unicodedata.is_normalized("NFC", span) else ""
