"""What a front end needs of an engine, met by the in-process Engine and by the engine core's client alike."""
from typing import Protocol, runtime_checkable

from engine.api.handle import RequestHandle
from engine.api.request import SynthesisRequest


@runtime_checkable
class EngineInterface(Protocol):
    info: dict          # the model's: sample_rate, samples_per_frame, speakers, model_type, ...

    def submit(self, request: SynthesisRequest) -> RequestHandle:
        """Checks the request (EngineInputError at once) and queues it; its chunks come on the handle."""

    def append_text(self, request_id: int, text: str) -> None:
        """Checks the text (EngineInputError at once); ignored after close_text or the request's end."""

    def close_text(self, request_id: int) -> None: ...

    def cancel(self, request_id: int) -> None:
        """The request's last chunk (`cancelled`) or error still comes, and ends its handle."""

    def stats(self) -> dict: ...

    def voice_names(self) -> list[str]: ...
