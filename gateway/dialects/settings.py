"""What both dialects map the same way: voice ids, language codes, float PCM, what we cannot honour."""
import logging

import numpy as np

from qwen_tts_client import protocol as p

from ..voice_map import resolve

log = logging.getLogger("qwen_tts_gateway")


def language(code: str | None) -> str | None:
    """An ISO 639-1 code (or a name) -> the model's language name; one it lacks passes on (engine: unknown_language)."""
    if not code:
        return None
    return p.LANGUAGE_CODES.get(code.lower().split("-")[0], code)


def voice(gateway, voice_id: str) -> str | None:
    """A dialect's voice id -> one of our voices: a speaker or clone by name, or a `serve --voice-map` alias;
    None where there is no such voice."""
    voices = gateway.voices()
    takes_voice = gateway.engine.info["model_type"] != "voice_design"
    name = resolve(voice_id, gateway.config.voice_map, voices, takes_voice)
    if name is None or name.lower() in {v.lower() for v in voices}:
        return name
    return None


def to_f32le(pcm16: bytes) -> bytes:
    return (np.frombuffer(pcm16, "<i2").astype(np.float32) / 32768.0).astype("<f4").tobytes()


class Ignored:
    """Settings a socket sends that we cannot honour: logged once per socket and setting, and documented."""

    def __init__(self, dialect: str):
        self.dialect, self.seen = dialect, set()

    def note(self, name: str, value) -> None:
        if value not in (None, {}, [], "") and name not in self.seen:
            self.seen.add(name)
            log.warning("%s dialect: %s=%r is not supported and is ignored (docs/dialects.md)", self.dialect,
                        name, value)


def tokens(text: str, starts: list[int], ends: list[int]) -> list[str]:
    """Aligned words widened to their whitespace-delimited tokens ("today" -> "today?"), as the vendors report them."""
    out = []
    for i, (start, end) in enumerate(zip(starts, ends)):
        low = ends[i - 1] if i else 0
        high = starts[i + 1] if i + 1 < len(starts) else len(text)
        while start > low and not text[start - 1].isspace():
            start -= 1
        while end < high and not text[end].isspace():
            end += 1
        out.append(text[start:end])
    return out
