"""Request checks on the caller's thread, so bad input fails at once."""
import dataclasses

from engine.api.request import EngineInputError, SamplingParams, SynthesisRequest

FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.1754943508222875e-38


class Validator:
    def __init__(self, cfg, voices, max_text_chars: int, check_model):
        self.cfg, self.voices, self.max_text_chars, self.check_model = cfg, voices, max_text_chars, check_model

    def prepare(self, request: SynthesisRequest) -> SynthesisRequest:
        whole = request.non_streaming_text
        if whole is None:
            whole = request.text_complete and self.cfg.whole_text_layout
        request = dataclasses.replace(request, sampling=request.sampling.with_defaults(self.cfg.generation),
                                      non_streaming_text=whole)
        self.check(request)
        return request

    def check_append(self, text: str) -> None:
        if not isinstance(text, str):
            raise EngineInputError("invalid_request", "text must be a string")
        if len(text) > self.max_text_chars:
            raise EngineInputError("text_too_long", f"text is longer than {self.max_text_chars} characters")
        if text.isascii():
            return
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise EngineInputError("invalid_request", "text must be valid Unicode (it holds a lone surrogate)") from None

    def check(self, r: SynthesisRequest) -> None:
        self.check_append(r.text)
        if r.instruct is not None:
            self.check_append(r.instruct)
        if r.text_complete and not r.text.strip():
            raise EngineInputError("empty_text", "text is empty: give some text to speak")
        if r.non_streaming_text and not r.text_complete:
            raise EngineInputError("invalid_request", "non-streaming text layout needs the whole text up front")
        if r.max_frames is not None and r.max_frames < 1:
            raise EngineInputError("invalid_request", "max_frames must be at least 1")
        if not r.chunk_frames or min(r.chunk_frames) < 1:
            raise EngineInputError("invalid_request", "chunk_frames must be positive frame counts")
        check_sampling(r.sampling)
        self.check_model(self.cfg, self.voices, r)


def check_sampling(s: SamplingParams) -> None:
    """Every number as the step's float32/int64 tensors hold it."""
    for name in ("temperature", "top_p", "repetition_penalty", "subtalker_temperature", "subtalker_top_p"):
        value = getattr(s, name)
        if not _is_number(value, float) or not FLOAT32_TINY <= value <= FLOAT32_MAX:
            raise EngineInputError("invalid_request", f"sampling {name} must be a positive number, finite in float32 "
                                                      f"(1.2e-38 to 3.4e38), not {value!r:.40}")
    for name in ("top_p", "subtalker_top_p"):
        if getattr(s, name) > 1:
            raise EngineInputError("invalid_request", f"sampling {name} must be at most 1")
    for name in ("top_k", "subtalker_top_k", "seed"):
        value = getattr(s, name)
        if value is not None and (not _is_number(value, int) or not 0 <= value < 2 ** 63):
            raise EngineInputError("invalid_request", f"sampling {name} must be an integer from 0 to 2**63 - 1 "
                                                      f"(top_k 0: off), not {value!r:.40}")


def _is_number(value, kind) -> bool:
    return isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
