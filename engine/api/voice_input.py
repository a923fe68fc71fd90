"""What a client may give for a clone voice: its name, its reference audio (read from a WAV's header first), its
transcript. One rule each, used wherever a voice is registered, spoken with or deleted."""
import io
import re
import wave

import numpy as np

from engine.api.request import EngineInputError, VoiceRef
from engine.api.wav import decode_pcm

VOICE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}")     # never a path: no '/', no leading '.'
NAME_RULE = "1-64 characters of letters, digits, '_', '.', '-', not starting with '.'"
REFERENCE_RATES = (8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000)   # resample_poly's filter stays small
MIN_REFERENCE_S, MAX_REFERENCE_S = 1, 60
MAX_TRANSCRIPT_CHARS = 1000
WAV_WIDTHS, WAV_CHANNELS = (1, 2, 4), (1, 2)
INVALID_AUDIO = "invalid_audio"


def is_voice_name(name) -> bool:
    return isinstance(name, str) and VOICE_NAME.fullmatch(name) is not None


def check_voice_name(name, code: str = "invalid_request") -> None:
    if not is_voice_name(name):
        raise EngineInputError(code, f"{_shown(name)} is not a voice name: a voice name is {NAME_RULE}")


def check_reference(ref: VoiceRef) -> None:
    check_reference_length(ref.sample_rate, np.asarray(ref.audio).size)
    text = ref.text or ""
    if len(text) > MAX_TRANSCRIPT_CHARS:
        raise EngineInputError("text_too_long", f"the reference transcript holds at most {MAX_TRANSCRIPT_CHARS} "
                                                "characters")
    if not ref.x_vector_only and not text.strip():
        raise EngineInputError("missing_reference", "ICL voice cloning needs the reference transcript "
                                                    "(or set x_vector_only)")


def check_reference_format(rate: int, channels: int, width: int, frames: int) -> None:
    if channels not in WAV_CHANNELS or width not in WAV_WIDTHS:
        raise EngineInputError(INVALID_AUDIO, f"reference audio of {channels} channels of {8 * width} bits: it must be "
                                              "mono or stereo, of 8, 16 or 32-bit integer samples")
    check_reference_length(rate, frames)


def check_reference_length(rate: int, frames: int) -> None:
    if rate not in REFERENCE_RATES:
        raise EngineInputError(INVALID_AUDIO, f"reference audio at {rate} Hz: the sample rate must be one of "
                                              f"{', '.join(map(str, REFERENCE_RATES))} Hz")
    if not MIN_REFERENCE_S * rate <= frames <= MAX_REFERENCE_S * rate:
        raise EngineInputError(INVALID_AUDIO, f"reference audio of {frames / rate:.2f} s: it must last "
                                              f"{MIN_REFERENCE_S}-{MAX_REFERENCE_S} s")


def read_reference_wav(data: bytes) -> tuple[np.ndarray, int]:
    """Mono float32 and its rate; the header is checked before any sample is decoded, the data against it."""
    try:
        w = wave.open(io.BytesIO(data), "rb")
    except (wave.Error, EOFError, ValueError) as exc:
        raise EngineInputError(INVALID_AUDIO, f"not a PCM WAV file ({exc})") from None
    except RuntimeError:            # the wave module's, bare, for a chunk whose size runs past the end of the file
        raise EngineInputError(INVALID_AUDIO, "not a PCM WAV file (a chunk runs past the end of the file)") from None
    rate, channels, width, frames = w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()
    check_reference_format(rate, channels, width, frames)
    raw = w.readframes(frames)
    frames = len(raw) // (channels * width)         # a header may claim more than the file holds
    check_reference_format(rate, channels, width, frames)
    return decode_pcm(raw[:frames * channels * width], width, channels), rate


def resample(audio: np.ndarray, rate: int, target: int) -> np.ndarray:
    if rate == target:
        return audio
    from math import gcd

    from scipy.signal import resample_poly
    g = gcd(rate, target)
    return resample_poly(audio, target // g, rate // g).astype(np.float32)


def _shown(name) -> str:
    return repr(name)[:40] if isinstance(name, str) else f"a {type(name).__name__}"
