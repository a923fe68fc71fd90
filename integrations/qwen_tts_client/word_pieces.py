"""A context's text cut at its timed words (`words` events), for the frameworks' word-level transcripts."""
from . import protocol as p


class WordPieces:
    """Each word's piece runs from the previous piece's end through its punctuation, so the pieces join to the text."""

    def __init__(self):
        self.text, self.cursor, self.last_end = "", 0, None

    def pieces(self, words: p.Words) -> list[tuple[str, float, float]]:
        out = []
        for start, end, stop in zip(words.start, words.end, words.char_end):
            while stop < len(self.text) and not (self.text[stop].isspace() or self.text[stop].isalnum()):
                stop += 1
            if stop > self.cursor:
                out.append((self.text[self.cursor:stop], start, end))
                self.cursor, self.last_end = stop, end
        return out

    @property
    def spaced(self) -> bool:
        return any(c.isspace() for c in self.text.strip())

    def rest(self) -> tuple[str, float] | None:
        """Once done: the text after the last piece (None: nothing left, or no timed word)."""
        if self.last_end is None or self.cursor >= len(self.text):
            return None
        piece, self.cursor = self.text[self.cursor:], len(self.text)
        return piece, self.last_end
