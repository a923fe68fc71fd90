"""Where each character of a filtered text came from in the client's text: runs of consecutive characters."""
from bisect import bisect_right


class OffsetMap:
    def __init__(self):
        self.starts: list[int] = []      # each run's first filtered offset
        self.origins: list[int] = []     # and its original offset
        self.length = 0                  # filtered characters mapped so far
        self.next_origin = -1            # the original offset just past the last mapped character

    def add(self, origin: int, count: int) -> None:
        if count <= 0:
            return
        if origin != self.next_origin:
            self.starts.append(self.length)
            self.origins.append(origin)
        self.length += count
        self.next_origin = origin + count

    def origin(self, i: int) -> int:
        k = bisect_right(self.starts, i) - 1
        return self.origins[k] + i - self.starts[k]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """A non-empty span of the filtered text -> from its first to just past its last original character."""
        return self.origin(start), self.origin(end - 1) + 1

    def end(self, until: int) -> int:
        """A filtered prefix's length -> the original prefix's that holds the same characters."""
        return self.origin(until - 1) + 1 if until else 0
