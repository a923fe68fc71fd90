"""Request checks on the caller's thread, so bad input fails at once."""
import dataclasses

from engine.api.request import EngineInputError, SamplingParams, SynthesisRequest

FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.1754943508222875e-38


class Validator:
    def __init__(self, cfg, voices, max_text_chars: int):
        self.cfg, self.voices, self.max_text_chars = cfg, voices, max_text_chars

    def prepare(self, request: SynthesisRequest) -> SynthesisRequest:
        request = dataclasses.replace(request, sampling=request.sampling.with_defaults(self.cfg.generation))
        self.check(request)
        return request

    def check_append(self, text: str) -> None:
        if not isinstance(text, str):
            raise EngineInputError("invalid_request", "text must be a string")
        if len(text) > self.max_text_chars:
            raise EngineInputError("text_too_long", f"text is longer than {self.max_text_chars} characters")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise EngineInputError("invalid_request", "text must be valid Unicode (it holds a lone surrogate)") from None

    def check(self, r: SynthesisRequest) -> None:
        cfg = self.cfg
        self.check_append(r.text)
        if r.instruct is not None:
            self.check_append(r.instruct)
        if r.text_complete and not r.text.strip():
            raise EngineInputError("empty_text", "text is empty: give some text to speak")
        if r.non_streaming_text and not r.text_complete:
            raise EngineInputError("invalid_request", "non-streaming text layout needs the whole text up front")
        language = (r.language or "auto").lower()
        if language not in cfg.public_languages:
            raise EngineInputError("unknown_language",
                                   f"unknown language '{r.language}'; supported: {', '.join(cfg.public_languages)}")
        if r.instruct and not cfg.takes_instruct:
            raise EngineInputError("instruct_not_supported",
                                   f"this model ({cfg.model_size} {cfg.model_type}) does not take an instruct text")
        if r.max_frames is not None and r.max_frames < 1:
            raise EngineInputError("invalid_request", "max_frames must be at least 1")
        if not r.chunk_frames or min(r.chunk_frames) < 1:
            raise EngineInputError("invalid_request", "chunk_frames must be positive frame counts")
        check_sampling(r.sampling)
        self._check_voice(r)

    def _check_voice(self, r: SynthesisRequest) -> None:
        cfg = self.cfg
        if cfg.model_type == "custom_voice":
            if r.voice is not None and r.voice.lower() not in cfg.speakers:
                raise EngineInputError("unknown_voice",
                                       f"unknown voice '{r.voice}'; this model has: {', '.join(cfg.speakers)}")
            if r.ref is not None:
                raise EngineInputError("invalid_request", "reference audio needs a Base model")
        elif cfg.model_type == "voice_design":
            if r.voice is not None or r.ref is not None:
                raise EngineInputError("unknown_voice", "a VoiceDesign model takes a voice description as instruct, "
                                                        "not a voice name or reference audio")
        else:
            if r.ref is None and r.voice is None:
                raise EngineInputError("missing_reference", "a Base model clones a voice: give reference audio "
                                                            "(with its transcript, or x_vector_only) or a registered voice")
            if r.voice is not None and r.ref is None and r.voice not in self.voices:
                raise EngineInputError("unknown_voice", f"no registered voice '{r.voice}'; "
                                                        f"registered: {', '.join(self.voices.names()) or 'none'}")
            if r.ref is not None and not r.ref.x_vector_only and not (r.ref.text or "").strip():
                raise EngineInputError("missing_reference", "ICL voice cloning needs the reference transcript "
                                                            "(or set x_vector_only)")


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
