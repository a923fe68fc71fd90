"""Word timestamps from Qwen3-ForcedAligner-0.6B: offline alignment, streaming commit logic, barge-in."""
from .align import Aligner, Word
from .bargein import Spoken, spoken
from .live import LiveWords
from .alignment_service import AlignmentService, AlignmentUnavailable
from .stream import Job, WordStream

__all__ = ["Aligner", "Word", "Spoken", "spoken", "LiveWords", "AlignmentService", "AlignmentUnavailable", "Job",
           "WordStream"]
