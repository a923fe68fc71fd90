"""One stream's text: what is settled into ids, what the model has been fed, and whether more may come."""


class TextFeed:
    def __init__(self, text_prefix: str, text: str, closed: bool):
        self.closed = closed
        self.unsettled = [text_prefix, text]   # text whose ids may still change
        self.settled = 0
        self.role_ids: list[int] = []
        self.feed: list[int] = []              # the model's ids before the text (from text_start on: the text's)
        self.text_start = 0
        self.fed = 0
        self.eos_fed = False

    @property
    def num_text_ids(self) -> int:
        return len(self.feed) - self.text_start

    def next_id(self, pad: int, eos: int) -> int | None:
        if self.fed < len(self.feed):
            self.fed += 1
            return self.feed[self.fed - 1]
        if not self.closed:
            return None
        if not self.eos_fed:
            self.eos_fed = True
            return eos
        return pad

    def ready(self) -> bool:
        return self.fed < len(self.feed) or self.closed
