"""Word timestamps from Qwen3-ForcedAligner-0.6B: offline alignment, streaming commit logic, barge-in. Names load on
first use, so that a front end taking only the word stream, live words and barge-in never imports torch."""
import importlib

_HOMES = {"Aligner": "aligner.align", "Word": "aligner.text", "Spoken": "aligner.bargein",
          "spoken": "aligner.bargein", "LiveWords": "aligner.live", "AlignmentService": "aligner.alignment_service",
          "AlignmentUnavailable": "aligner.alignment_service", "Job": "aligner.stream", "WordStream": "aligner.stream"}
__all__ = list(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'aligner' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
