"""Text intake at O(new text) per append: only the unsettled tail is tokenized again."""
from engine.api.request import EngineInputError
from engine.core.sequence import Sequence, Status

AHEAD_IDS = 8          # ids not yet fed below which a stream's new text is settled at once


class TextIntake:
    def __init__(self, tokenizer, prefix: str):
        self.tokenizer = tokenizer
        self.control_ids, plain = tokenizer.split_control(prefix)
        self.control_chars = len(prefix) - len(plain)
        self.role_ids = len(self.control_ids) + len(tokenizer.encode(plain))
        self.changed: dict[int, Sequence] = {}

    def add(self, seq: Sequence, text: str = "", closed: bool = False) -> None:
        if not seq.text.settled:      # the prefix's control tokens are the model's: the rest is tokenized as plain text
            seq.text.unsettled[0] = seq.text.unsettled[0][self.control_chars:]
            self._commit(seq, self.control_ids, len(self.control_ids))
        if text:
            seq.text.unsettled.append(text)
        seq.text.closed = seq.text.closed or closed
        self.changed[seq.id] = seq

    @staticmethod
    def _due(seq: Sequence) -> bool:
        """A running stream with ids enough ahead settles its text later, in one piece: the same ids, fewer calls."""
        text = seq.text
        return seq.status is not Status.RUNNING or text.closed or len(text.feed) - text.fed < AHEAD_IDS

    def settle(self, waits=lambda seq: False) -> list[tuple[Sequence, EngineInputError]]:
        """`waits`: a stream whose ids nobody reads before it is admitted (the admission queue's): settled then."""
        if not self.changed:
            return []
        seqs, later = [], {}
        for seq_id, s in self.changed.items():
            if s.status is Status.FINISHED:
                continue
            if self._due(s) and not waits(s):
                seqs.append(s)
            else:
                later[seq_id] = s
        self.changed = later
        if not seqs:
            return []
        tails = ["".join(s.text.unsettled) for s in seqs]
        closed = [s.text.closed for s in seqs]
        try:
            splits = self.tokenizer.split_final_batch(tails, closed)
        except TypeError:         # a text the tokenizer refuses (a lone surrogate) must not hold back the others
            splits = [self._split_alone(tail, c) for tail, c in zip(tails, closed)]
        failed = []
        for seq, tail, split in zip(seqs, tails, splits):
            if split is None:
                failed.append((seq, EngineInputError("invalid_request", "the text could not be tokenized")))
                continue
            ids, count, cut = split
            self._commit(seq, ids, count)
            seq.text.unsettled = [tail[cut:]]
            if seq.text.closed and not seq.text.num_text_ids:
                failed.append((seq, EngineInputError("empty_text", "the request's text ended up empty")))
        return failed

    def _split_alone(self, tail: str, closed: bool):
        try:
            return self.tokenizer.split_final_batch([tail], [closed])[0]
        except TypeError:
            return None

    def _commit(self, seq: Sequence, ids: list[int], count: int) -> None:
        role = max(0, self.role_ids - seq.text.settled)
        if role:
            seq.text.role_ids = seq.text.role_ids[:self.role_ids - role] + ids[:role]
        seq.text.feed.extend(ids[role:count])
        seq.text.settled += count
