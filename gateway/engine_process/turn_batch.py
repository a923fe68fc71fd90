"""What a front end sends the core in one event-loop turn, as one message: appends to one request merge into one."""
from engine.api.commands import AppendText, CancelRequest, CloseText


class TurnBatch:
    def __init__(self):
        self.messages: list = []
        self.appends: dict[int, AppendText] = {}    # a request's last AppendText, while nothing followed it

    def add(self, msg) -> bool:
        """True for the turn's first message: the caller sends the batch at the end of the turn."""
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

    def take(self) -> list:
        messages, self.messages = self.messages, []
        self.appends.clear()
        return messages
