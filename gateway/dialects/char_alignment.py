"""Settled word times -> ElevenLabs' character alignment: every character of the text in order, in milliseconds,
each message's times from where the previous message's characters ended (ElevenLabs restarts them per message)."""
from qwen_tts_client import protocol as p

Chars = tuple[list[str], list[int], list[int]]        # chars, charStartTimesMs, charDurationsMs


class CharTimes:
    def __init__(self):
        self.text = ""               # the context's text as sent, which `words` offsets index
        self.cursor = 0              # characters already sent
        self.end_s = 0.0             # where the last character sent ends (seconds from the context's first audio)
        self.base_ms = 0             # the same, in ms as the client sums it: the next message's times start there

    def words(self, msg: p.Words) -> Chars:
        """The characters up to the last word's end: a word's spread over its time, those before it over the gap."""
        pieces = []
        for start, end, char_start, char_end in zip(msg.start, msg.end, msg.char_start, msg.char_end):
            char_start = max(char_start, self.cursor)
            pieces.append((self.text[self.cursor:char_start], self.end_s, max(start, self.end_s)))
            pieces.append((self.text[char_start:char_end], max(start, self.end_s), max(end, start, self.end_s)))
            self.cursor, self.end_s = max(char_end, self.cursor), max(end, start, self.end_s)
        return self._timed(pieces)

    def tail(self) -> Chars | None:
        """The text after the last word (closing punctuation), at the end: sent before `isFinal`."""
        if self.cursor >= len(self.text):
            return None
        piece = (self.text[self.cursor:], self.end_s, self.end_s)
        self.cursor = len(self.text)
        return self._timed([piece])

    def _timed(self, pieces) -> Chars:
        chars, starts, durations = [], [], []
        for text, t0, t1 in pieces:
            edges = [round(1000 * (t0 + (t1 - t0) * i / len(text))) for i in range(len(text) + 1)] if text else []
            for i, char in enumerate(text):
                chars.append(char)
                starts.append(edges[i] - self.base_ms)
                durations.append(edges[i + 1] - edges[i])
        if chars:
            self.base_ms += starts[-1] + durations[-1]
        return chars, starts, durations
