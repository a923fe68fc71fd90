"""A text in a Unicode normal form, each of its characters mapped back to the original characters it came from."""
import unicodedata

MAX_CLUSTER = 32      # marks past this many characters start a cluster of their own: bounded work per character
STARTERS = ("Lu", "Ll", "Lo", "Nd", "Zs")


def normalized(text: str, form: str) -> tuple[str, list[tuple[int, int]]]:
    """(text in `form`, origin): origin[i] is the span of the original cluster (a base and what composes with it or
    marks it) that character i of the normal text comes from."""
    if unicodedata.is_normalized(form, text):
        return text, [(i, i + 1) for i in range(len(text))]
    whole = unicodedata.normalize(form, text)
    for exact in (False, True):                # the quick cut is checked: where it differs, every character is tried
        parts, origin = [], []
        for s, e in clusters(text, form, exact):
            part = unicodedata.normalize(form, text[s:e])
            parts.append(part)
            origin += [(s, e)] * len(part)
        if exact or "".join(parts) == whole:
            return "".join(parts), origin


def clusters(text: str, form: str, exact: bool = True) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i, ch in enumerate(text):
        if out and i - out[-1][0] < MAX_CLUSTER and (exact or unicodedata.category(ch) not in STARTERS) \
                and _joins(text[out[-1][0]:i], ch, form):
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def _joins(before: str, ch: str, form: str) -> bool:
    n = unicodedata.normalize
    return unicodedata.category(ch)[0] == "M" or n(form, before + ch) != n(form, before) + n(form, ch)
