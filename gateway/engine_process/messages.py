"""What crosses between a front end and the engine core besides the requests' own commands (engine.api.commands):
dataclasses, a list of them pickled once per batch (wire.py)."""
from dataclasses import dataclass

from engine import AudioChunk, EngineInputError


@dataclass
class Failure:
    """An exception that crosses the process boundary: input errors keep their code, anything else is internal."""
    message: str
    code: str | None = None

    @classmethod
    def of(cls, exc: BaseException) -> "Failure":
        return cls(str(exc), exc.code if isinstance(exc, EngineInputError) else None)

    def exception(self) -> Exception:
        return EngineInputError(self.code, self.message) if self.code else RuntimeError(self.message)


# front end -> core
@dataclass(slots=True)
class Hello:
    pid: int                      # the front end's process: once it is gone, its requests are cancelled


@dataclass(slots=True)
class RegisterVoice:
    key: int
    name: str
    ref: object                   # engine.VoiceRef


@dataclass(slots=True)
class DeleteVoice:
    key: int
    name: str


@dataclass(slots=True)
class Align:
    key: int
    audio: object                 # float32 PCM at the model's rate
    units: list
    due: float | None


@dataclass(slots=True)
class Unalign:
    """The Align of `key` is no longer wanted (its context ended): dropped unless its batch has begun; no answer."""
    key: int


@dataclass(slots=True)
class AdmitWords:
    """Answered with None (a new context gets words) or the reason it gets none."""
    key: int


@dataclass(slots=True)
class Shutdown:
    pass


# core -> front end
@dataclass(slots=True)
class Ready:
    description: dict             # Engine.description() and `aligner`: plain data, no torch
    first_id: int                 # this front end's request ids count from here: unique across front ends


@dataclass(slots=True)
class Chunk:
    id: int
    chunk: AudioChunk


@dataclass(slots=True)
class Failed:
    id: int
    failure: Failure


@dataclass(slots=True)
class Answer:
    """To a RegisterVoice (the name), a DeleteVoice (whether it was there) or an Align (the words' times)."""
    key: int
    result: object                # or a Failure


@dataclass(slots=True)
class Stats:
    stats: dict


@dataclass(slots=True)
class VoiceList:
    names: list[str]
