"""A context's text as the client sent it and as it is spoken (filtered), with spans of the one mapped to the other."""
from bisect import bisect_right

from .text_filter import Filters, TextFilter


class ClientText:
    def __init__(self, settings):
        filters = Filters.of(settings)               # the first `text` message's
        self.filter = TextFilter(filters) if filters.any else None
        self.pieces: list[str] = []      # every text message, in order
        self.ends: list[int] = []        # the client's text length after each

    def add(self, piece: str) -> str:
        """A text message -> the text it adds to speech (some may be held back until the next one or `close`)."""
        self.pieces.append(piece)
        self.ends.append((self.ends[-1] if self.ends else 0) + len(piece))
        return self.filter.feed(piece) if self.filter else piece

    def close(self) -> str:
        """At a flush or end: the text held back, decided."""
        return self.filter.feed("", final=True) if self.filter else ""

    def whole(self) -> str:
        return "".join(self.pieces)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """A word's span in the spoken text -> in the client's."""
        return self.filter.map.span(start, end) if self.filter else (start, end)

    def until(self, spoken: int) -> int:
        """The length of a prefix of the spoken text -> of the client's prefix holding its characters."""
        return self.filter.map.end(spoken) if self.filter else spoken

    def slice(self, start: int, end: int) -> str:
        """The client's text from start to end, joined from the messages that hold it."""
        first = bisect_right(self.ends, start)
        last = bisect_right(self.ends, end - 1) if end > start else first - 1
        origin = self.ends[first - 1] if first else 0
        return "".join(self.pieces[first:last + 1])[start - origin:end - origin]
