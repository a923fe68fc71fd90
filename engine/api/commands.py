"""What callers tell the engine about their requests: its inbox's commands, also what a front end sends the core."""
from dataclasses import dataclass

from engine.api.request import SynthesisRequest


@dataclass(slots=True)
class AddRequest:
    """A request already checked (Validator.prepare) by whoever sends it."""
    id: int
    request: SynthesisRequest


@dataclass(slots=True)
class AppendText:
    id: int
    text: str


@dataclass(slots=True)
class CloseText:
    id: int


@dataclass(slots=True)
class CancelRequest:
    """Its last chunk (`cancelled`) or error still comes."""
    id: int


@dataclass(slots=True)
class Batch:
    """Commands applied in order, the text they bring settled once after them."""
    commands: list

