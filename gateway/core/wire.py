"""Messages between the front end and the engine core: lists of tuples, pickled once per batch."""
import pickle
from dataclasses import dataclass
from pathlib import Path

from engine import EngineInputError


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


def dumps(messages: list) -> bytes:
    return pickle.dumps(messages, protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: bytes) -> list:
    return pickle.loads(data)


def failure_path(address: str) -> Path:
    """Where an engine core that could not start leaves the one line saying why, beside its socket."""
    return Path(address.removeprefix("ipc://")).with_name("failure")
