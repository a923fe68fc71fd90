"""What a request may ask of a Qwen3-TTS variant: its languages, an instruct, its speakers or clone voices. Torch-free:
a front end checks requests with the rules the engine core sends it."""
from dataclasses import dataclass

from engine.api.request import EngineInputError, SynthesisRequest
from engine.api.voice_input import check_reference, check_voice_name


@dataclass(frozen=True)
class RequestRules:
    """What check_request and the Validator read of a TTSConfig, as plain data (the same names)."""
    model_type: str
    model_size: str
    public_languages: tuple[str, ...]
    takes_instruct: bool
    speakers: tuple[str, ...]
    whole_text_layout: bool
    generation: dict

    @classmethod
    def of(cls, cfg) -> "RequestRules":
        return cls(cfg.model_type, cfg.model_size, tuple(cfg.public_languages), cfg.takes_instruct,
                   tuple(cfg.speakers), cfg.whole_text_layout, dict(cfg.generation))


def check_request(cfg, voices, r: SynthesisRequest) -> None:
    """`cfg`: a TTSConfig or its RequestRules. A module-level function: front ends get it by reference."""
    language = (r.language or "auto").lower()
    if language not in cfg.public_languages:
        raise EngineInputError("unknown_language",
                               f"unknown language {r.language!r:.40}; supported: {', '.join(cfg.public_languages)}")
    if r.instruct and not cfg.takes_instruct:
        raise EngineInputError("instruct_not_supported",
                               f"this model ({cfg.model_size} {cfg.model_type}) does not take an instruct text")
    if cfg.model_type == "custom_voice":
        if r.voice is not None and r.voice.lower() not in cfg.speakers:
            raise EngineInputError("unknown_voice",
                                   f"unknown voice {r.voice!r:.40}; this model has: {', '.join(cfg.speakers)}")
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
        if r.voice is not None and r.ref is None:
            check_voice_name(r.voice, "unknown_voice")
            if r.voice not in voices:
                raise EngineInputError("unknown_voice", f"no registered voice {r.voice!r}: GET /v1/voices lists them")
        if r.ref is not None:
            check_reference(r.ref)
