"""A context's text as it is spoken: <think> blocks, markdown syntax and emoji dropped as the text streams in.
A marker cut across pieces is held back until it is known (at most a pattern's bound), and every character kept is
mapped to its offset in the client's text, so that word spans and the barge-in split index what the client sent."""
from dataclasses import dataclass

from . import markup as m
from .offset_map import OffsetMap

NORMAL, THINK, CODE = "normal", "think", "code"
FILTERS = ("think", "markdown", "emoji")      # each switched by a field filter_<name>


@dataclass(frozen=True)
class Filters:
    think: bool = True
    markdown: bool = True
    emoji: bool = True

    @classmethod
    def of(cls, settings) -> "Filters":
        return cls(*(getattr(settings, f"filter_{name}") for name in FILTERS))

    @property
    def any(self) -> bool:
        return self.think or self.markdown or self.emoji

    def apply(self, text: str) -> str:
        """A whole text at once."""
        return TextFilter(self).feed(text, final=True) if self.any else text


class TextFilter:
    def __init__(self, filters: Filters):
        self.filters, self.map = filters, OffsetMap()
        self.rules = (m.THINK_RULES if filters.think else ()) + (m.MARKDOWN_RULES if filters.markdown else ()) + \
            ((m.EMOJI,) if filters.emoji else ())
        self.plain = m.triggers(filters.think, filters.markdown, filters.emoji)
        self.held, self.origin = "", 0     # text not decided yet, and its offset in the client's text
        self.mode, self.before = NORMAL, "\n"    # before: the last character decided

    def feed(self, piece: str, final: bool = False) -> str:
        """The spoken text that `piece` completes; `final` (a flush or end) decides what was held back."""
        if not self.held and self.mode == NORMAL and self.before != "\n" and not self.plain.search(piece):
            return self._plain(piece)                  # no rule can start in it: an LLM's usual token
        text, out = self.held + piece, []
        i = self._run(text, final, out)
        if i:
            self.before = text[i - 1]
        self.held, self.origin = text[i:], self.origin + i
        return "".join(out)

    def _plain(self, piece: str) -> str:
        if piece:
            self.map.add(self.origin, len(piece))
            self.before, self.origin = piece[-1], self.origin + len(piece)
        return piece

    def _emit(self, text: str, start: int, end: int, out: list) -> int:
        out.append(text[start:end])
        self.map.add(self.origin + start, end - start)
        return end

    def _run(self, text: str, final: bool, out: list) -> int:
        i = 0
        while i < len(text):
            before = text[i - 1] if i else self.before
            if self.mode == THINK:
                close = m.THINK_CLOSE.search(text, i, partial=True)
                if close is None or close.partial:
                    return len(text) if final or close is None else close.start()
                i, self.mode = close.end(), NORMAL
                continue
            line_start = before == "\n"
            if self.mode == CODE:
                rules = (m.FENCE,) if line_start else ()
            else:
                rules = (m.LINE_RULES if line_start and self.filters.markdown else ()) + self.rules
            match = next((x for x in (r.match(text, i, partial=not final) for r in rules) if x), None)
            if match is not None and (match.partial or match.end() == len(text) and not final):
                return i                                           # more text may change it
            if match is None:
                i = self._emit(text, i, self._plain_end(text, i), out)
                continue
            i = self._apply(match, text, before, out)
        return i

    def _plain_end(self, text: str, i: int) -> int:
        """Where plain text from `i` ends: past its line in code or at a newline, else before the next possible marker."""
        if self.mode == CODE or text[i] == "\n":
            stop = text.find("\n", i)
            return len(text) if stop == -1 else stop + 1
        stop = self.plain.search(text, i + 1)
        return stop.start() if stop else len(text)

    def _apply(self, match, text: str, before: str, out: list) -> int:
        rule, end = match.re, match.end()
        if rule is m.THINK_OPEN:
            self.mode = THINK
        elif rule is m.FENCE:
            self.mode = NORMAL if self.mode == CODE else CODE
        elif rule is m.ESCAPE:
            self._emit(text, end - 1, end, out)
        elif rule in (m.STARS, m.UNDERSCORES) and \
                m.emphasis_kept(match.group(), before, text[end] if end < len(text) else None):
            self._emit(text, match.start(), end, out)
        return end
