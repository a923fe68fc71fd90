"""The engine core: the engine and its aligner in a process of their own, and the front end's client of it."""
from . import starts
from .client import EngineClient
from .spec import EngineSpec

__all__ = ["EngineClient", "EngineSpec", "starts"]
