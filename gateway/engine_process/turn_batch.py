"""What a front end sends the core in one message, at most every BATCH_S: appends to one request merge into one."""
from engine.api.commands import AppendText, CancelRequest, CloseText

BATCH_S = 0.002      # under load a batch carries many event-loop turns; the engine drains its inbox once a step


class TurnBatch:
    def __init__(self):
        self.messages: list = []
        self.appends: dict[int, AppendText] = {}    # a request's last AppendText, while nothing followed it
        self.sent_at = float("-inf")

    def add(self, msg) -> bool:
        """True for the batch's first message: the caller sends the batch at `due`."""
        kind = type(msg)
        if kind is AppendText:
            last = self.appends.get(msg.id)
            if last is not None:
                last.text += msg.text
                return False
            self.appends[msg.id] = msg
        elif kind is CloseText or kind is CancelRequest:
            self.appends.pop(msg.id, None)
        self.messages.append(msg)
        return len(self.messages) == 1

    def due(self, now: float) -> float:
        """At once after a quiet BATCH_S, else BATCH_S after the last batch."""
        return max(now, self.sent_at + BATCH_S)

    def take(self, now: float) -> list:
        self.sent_at = now
        messages, self.messages = self.messages, []
        self.appends.clear()
        return messages
