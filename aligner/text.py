"""Word units as the forced aligner's processor cuts them, each with its span in the original text; aligned words."""
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .normal_form import normalized

CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
       (0x2B820, 0x2CEAF), (0xF900, 0xFAFF))
KANA = ((0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F))
HANGUL = ((0xAC00, 0xD7AF), (0x1100, 0x11FF), (0x3130, 0x318F))


KOREAN_WORDS = Path(__file__).parent / "assets" / "korean_dict_jieba.dict"


@dataclass(frozen=True)
class Unit:
    text: str
    start: int       # character offsets into the segmented text
    end: int


@dataclass
class Word:
    word: str
    start: float          # seconds
    end: float
    char_start: int
    char_end: int


def _in(ch: str, ranges) -> bool:
    return ch >= "\u1100" and any(lo <= ord(ch) <= hi for lo, hi in ranges)


@lru_cache(maxsize=4096)
def kept(ch: str) -> bool:      # cached: every character of every job's text comes here
    return ch == "'" or unicodedata.category(ch)[0] in "LN"


def clean(token: str) -> str:
    return "".join(ch for ch in token if kept(ch))


def resolve_language(language: str, text: str) -> str:
    """'japanese', 'korean' or 'spaces'; `auto` picks by script."""
    language = (language or "auto").lower()
    if language == "auto":
        language = next(("japanese" if _in(ch, KANA) else "korean" for ch in text
                         if _in(ch, KANA) or _in(ch, HANGUL)), "spaces")
    return language if language in ("japanese", "korean") else "spaces"


def segment(text: str, language: str) -> list[Unit]:
    """Units over `text` in any Unicode form: segmented in its normal form (NFKC for Japanese, as nagisa reads it;
    NFC otherwise), each span mapped back to whole original characters, marks that follow a word included."""
    rule = resolve_language(language, text)
    norm, origin = normalized(text, "NFKC" if rule == "japanese" else "NFC")
    if rule == "spaces":
        units = _space_units(norm)
    else:
        norm = norm.replace("İ", "I").replace(" ", "\u3000") if rule == "japanese" else norm   # nagisa's own
        units = _locate(_japanese(norm) if rule == "japanese" else _korean().tokenize(norm), norm)
    return _original(units, origin, text)


def _space_units(text: str) -> list[Unit]:
    units, run = [], []                       # run: (char, index) of the current non-CJK stretch

    def close_run():
        if run:
            units.append(Unit("".join(c for c, _ in run), run[0][1], run[-1][1] + 1))
            run.clear()

    for i, ch in enumerate(text):
        if ch.isspace():
            close_run()
        elif kept(ch) and _in(ch, CJK):
            close_run()
            units.append(Unit(ch, i, i + 1))
        elif kept(ch):
            run.append((ch, i))
    close_run()
    return units


def _locate(tokens: list[str], text: str) -> list[Unit]:
    """The segmenter's tokens are pieces of `text` in order: each from its kept first to its kept last character."""
    units, at = [], 0
    for token in tokens:
        found = text.find(token, at) if token else -1
        if found < 0:
            continue
        keep = [i for i in range(found, found + len(token)) if kept(text[i])]
        if keep:
            units.append(Unit(clean(token), keep[0], keep[-1] + 1))
        at = found + len(token)
    return units


def _original(units: list[Unit], origin: list[tuple[int, int]], text: str) -> list[Unit]:
    """Spans of the normal text -> of `text`; units that share an original character (one that expanded) merge."""
    out: list[Unit] = []
    for u in units:
        start, end = origin[u.start][0], origin[u.end - 1][1]
        while end < len(text) and unicodedata.category(text[end])[0] == "M":
            end += 1
        if out and start < out[-1].end:
            out[-1] = Unit(out[-1].text + u.text, out[-1].start, max(end, out[-1].end))
        else:
            out.append(Unit(u.text, start, end))
    return out


def _japanese(text: str) -> list[str]:
    import nagisa
    return nagisa.tagging(text).words


@lru_cache(maxsize=1)
def _korean():
    from soynlp.tokenizer import LTokenizer
    lines = KOREAN_WORDS.read_text(encoding="utf-8").splitlines()
    return LTokenizer(scores={line.split()[0]: 1.0 for line in lines if line.strip()})
