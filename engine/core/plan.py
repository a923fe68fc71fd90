"""What the scheduler hands a step: plain lists the runner turns into tensors."""
from dataclasses import dataclass, field

from engine.api.request import EngineInputError
from engine.models.base import Prompt


@dataclass
class Talk:
    """Streams that feed a text id and draw their next frame's first code, at these positions."""
    seqs: list = field(default_factory=list)
    text_ids: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    allow_eos: list[bool] = field(default_factory=list)
    stalled: list = field(default_factory=list)      # waiting for a free KV block
    undo: list = field(default_factory=list)         # (talker, text fed, eos fed) before it took its id: not launched

    def add(self, seq, text_id: int, position: int, allow_eos: bool) -> None:
        self.seqs.append(seq)
        self.text_ids.append(text_id)
        self.positions.append(position)
        self.allow_eos.append(allow_eos)


@dataclass
class Plan:
    admitted: list = field(default_factory=list)
    prompts: list[Prompt] = field(default_factory=list)
    rejected: list[tuple[object, EngineInputError]] = field(default_factory=list)   # a prompt that can never fit
    ready: list = field(default_factory=list)        # a frame's first code drawn (the admitted too): predict, decode
    prefilled: bool = False                          # the admitted streams' prompts are in their KV, the talk launched
    talk: Talk = field(default_factory=Talk)
