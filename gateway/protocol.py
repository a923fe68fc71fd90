"""Protocol v1 of `GET /v1/tts/websocket`: every message schema, its validation, and the binary audio framing.

The single source of truth: the gateway, the LiveKit and Pipecat integrations and the tests import it.
docs/protocol.md describes the same rules for people."""
import base64
import json
import math
import struct
import sys
from dataclasses import MISSING, asdict, dataclass, fields
from typing import ClassVar, Mapping, get_type_hints

PROTOCOL_VERSION = 1
AUDIO_FRAME_VERSION = 1
SAMPLE_RATES = (24000, 16000, 8000)
ENCODINGS = ("pcm_s16le", "mulaw", "alaw", "opus")
AUDIO_FORMATS = ("binary", "base64")
ALL_CONTEXTS = "*"
MAX_CONTEXT_ID_BYTES = 255

# error codes; the engine's EngineInputError codes (second group) pass through unchanged
INVALID_JSON, UNKNOWN_TYPE, INVALID_MESSAGE, MESSAGE_TOO_LARGE = "invalid_json", "unknown_type", "invalid_message", \
    "message_too_large"
UNKNOWN_CONTEXT, DUPLICATE_CONTEXT, CONTEXT_ENDED = "unknown_context", "duplicate_context", "context_ended"
TOO_MANY_CONTEXTS, CONTEXT_TIMEOUT, BUSY, INTERNAL = "too_many_contexts", "context_timeout", "busy", "internal"
UNAUTHORIZED, INVALID_PARAMETER, NOT_READY, SHUTTING_DOWN = "unauthorized", "invalid_parameter", "not_ready", \
    "shutting_down"
UNKNOWN_VOICE, UNKNOWN_LANGUAGE, EMPTY_TEXT, MISSING_REFERENCE = "unknown_voice", "unknown_language", "empty_text", \
    "missing_reference"
INSTRUCT_NOT_SUPPORTED, TEXT_TOO_LONG, INVALID_REQUEST = "instruct_not_supported", "text_too_long", "invalid_request"
GENERATION_FAILED = "generation_failed"              # this request made the engine fail; the others went on
TOO_MUCH_PENDING_TEXT, SLOW_CONSUMER = "too_much_pending_text", "slow_consumer"
ALIGNMENT_UNAVAILABLE = "alignment_unavailable"      # the one error that does not end its context
RETRYABLE = frozenset({BUSY, INTERNAL, NOT_READY, SHUTTING_DOWN})

# WebSocket close codes of connection errors
CLOSE_GOING_AWAY, CLOSE_POLICY, CLOSE_TOO_BIG, CLOSE_INTERNAL, CLOSE_TRY_LATER = 1001, 1008, 1009, 1011, 1013


class ProtocolError(Exception):
    def __init__(self, code: str, message: str, context_id: str | None = None):
        super().__init__(message)
        self.code, self.message, self.context_id = code, message, context_id

    def to_message(self) -> "Error":
        return Error(self.code, self.message, self.code in RETRYABLE, self.context_id)


# client -> server -------------------------------------------------------------------------------------------------
@dataclass
class Text:
    type: ClassVar[str] = "text"
    context_id: str
    text: str
    voice: str | None = None
    language: str | None = None
    instruct: str | None = None
    word_timestamps: bool = True
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None


@dataclass
class Flush:
    type: ClassVar[str] = "flush"
    context_id: str


@dataclass
class End:
    type: ClassVar[str] = "end"
    context_id: str


@dataclass
class Cancel:
    type: ClassVar[str] = "cancel"
    context_id: str                   # or ALL_CONTEXTS
    played_ms: float | None = None


@dataclass
class Keepalive:
    type: ClassVar[str] = "keepalive"
    context_id: str | None = None     # None: every context of the socket


ClientMessage = Text | Flush | End | Cancel | Keepalive
CLIENT_MESSAGES = {cls.type: cls for cls in (Text, Flush, End, Cancel, Keepalive)}


# server -> client -------------------------------------------------------------------------------------------------
@dataclass
class Ready:
    type: ClassVar[str] = "ready"
    session_id: str
    sample_rate: int
    encoding: str
    max_contexts: int
    voices: list[str]
    protocol: int = PROTOCOL_VERSION
    packet_ms: int | None = None      # opus: every audio message is one raw Opus packet of this many ms


@dataclass
class Audio:
    """Base64 mode; in binary mode the same fields travel in the frame header (pack_audio)."""
    type: ClassVar[str] = "audio"
    context_id: str
    seq: int
    sample_offset: int
    data: bytes


@dataclass
class Words:
    type: ClassVar[str] = "words"
    context_id: str
    words: list[str]
    start: list[float]
    end: list[float]
    char_start: list[int]
    char_end: list[int]


@dataclass
class Flushed:
    type: ClassVar[str] = "flushed"
    context_id: str
    flush_id: int


@dataclass
class Done:
    type: ClassVar[str] = "done"
    context_id: str
    audio_ms: float


@dataclass
class Cancelled:
    type: ClassVar[str] = "cancelled"
    context_id: str
    played_ms: float
    generated_ms: float
    spoken_text: str | None = None          # the context's text to the end of the last spoken word; None: unknown
    spoken_until_char: int | None = None
    unspoken_text: str | None = None        # the rest of the context's text


@dataclass
class Error:
    type: ClassVar[str] = "error"
    code: str
    message: str
    retryable: bool = False
    context_id: str | None = None


ServerMessage = Ready | Audio | Words | Flushed | Done | Cancelled | Error
SERVER_MESSAGES = {cls.type: cls for cls in (Ready, Audio, Words, Flushed, Done, Cancelled, Error)}


def ends_context(msg: ServerMessage) -> bool:
    """A context's last message: done, cancelled, or an error about it (except alignment_unavailable)."""
    return isinstance(msg, (Done, Cancelled)) or isinstance(msg, Error) and msg.context_id is not None \
        and msg.code != ALIGNMENT_UNAVAILABLE


@dataclass
class StreamFormat:
    """The socket's audio, chosen by query parameters."""
    sample_rate: int = 24000
    encoding: str = "pcm_s16le"
    audio_format: str = "binary"

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> "StreamFormat":
        rate = query.get("sample_rate", "24000")
        if not rate.isdigit() or int(rate) not in SAMPLE_RATES:
            raise ProtocolError(INVALID_PARAMETER, f"sample_rate must be one of {SAMPLE_RATES}")
        fmt = cls(int(rate), query.get("encoding", "pcm_s16le"), query.get("audio_format", "binary"))
        if fmt.encoding not in ENCODINGS:
            raise ProtocolError(INVALID_PARAMETER, f"encoding must be one of {ENCODINGS}")
        if fmt.audio_format not in AUDIO_FORMATS:
            raise ProtocolError(INVALID_PARAMETER, f"audio_format must be one of {AUDIO_FORMATS}")
        return fmt

    def to_query(self) -> dict[str, str]:
        return {"sample_rate": str(self.sample_rate), "encoding": self.encoding, "audio_format": self.audio_format}


# encoding and parsing ---------------------------------------------------------------------------------------------
def encode(message: ServerMessage | ClientMessage) -> str:
    body = {"type": message.type, **asdict(message)}
    if isinstance(message, Audio):
        body["data"] = base64.b64encode(message.data).decode("ascii")
    return to_json(body)


def to_json(body) -> str:
    """Compact JSON that is valid UTF-8 whatever it echoes: lone surrogates are sent as \\u escapes."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return text if is_unicode(text) else json.dumps(body, separators=(",", ":"))


def is_unicode(text: str) -> bool:
    """No lone surrogates (JSON's \\udcff escapes decode to them): only such text can travel as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_HEADER = struct.Struct("<II")


def pack_audio(context_id: str, seq: int, sample_offset: int, audio: bytes) -> bytes:
    cid = context_id.encode("utf-8")
    return bytes((AUDIO_FRAME_VERSION, len(cid))) + cid + _HEADER.pack(seq, sample_offset & 0xFFFFFFFF) + audio


def unpack_audio(frame: bytes) -> Audio:
    if len(frame) < 2 or frame[0] != AUDIO_FRAME_VERSION or len(frame) < 2 + frame[1] + _HEADER.size:
        raise ValueError("not a protocol v1 audio frame")
    n = frame[1]
    seq, offset = _HEADER.unpack_from(frame, 2 + n)
    return Audio(frame[2:2 + n].decode("utf-8"), seq, offset, frame[2 + n + _HEADER.size:])


def _check_field(name: str, hint, value):
    kinds = {str: str, bool: bool, int: int, float: (int, float)}
    allowed = [t for t in getattr(hint, "__args__", (hint,)) if t is not type(None)]
    if value is None and type(None) in getattr(hint, "__args__", ()):
        return None
    kind = kinds[allowed[0]]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ValueError(f"field '{name}' must be {allowed[0].__name__}")
    if kind is str and not is_unicode(value):
        raise ValueError(f"field '{name}' must be valid Unicode (it holds a lone surrogate)")
    if allowed[0] is float:
        value = float(value) if abs(value) <= sys.float_info.max else math.inf   # (a huge int overflows)
        if not math.isfinite(value):
            raise ValueError(f"field '{name}' must be finite")
    return value


def _build(cls, body: dict):
    values = {}
    for f, hint in _FIELDS[cls]:
        if f.name in body:
            values[f.name] = _check_field(f.name, hint, body[f.name])
        elif f.default is MISSING:
            raise ValueError(f"missing field '{f.name}'")
    return cls(**values)


_FIELDS = {cls: [(f, get_type_hints(cls)[f.name]) for f in fields(cls)] for cls in CLIENT_MESSAGES.values()}


def _check_client(msg: ClientMessage) -> None:
    cid = msg.context_id
    if cid is not None and not 0 < len(cid.encode("utf-8")) <= MAX_CONTEXT_ID_BYTES:
        raise ValueError(f"context_id must be 1 to {MAX_CONTEXT_ID_BYTES} bytes of UTF-8")
    if cid == ALL_CONTEXTS and not isinstance(msg, Cancel):
        raise ValueError(f"context_id '{ALL_CONTEXTS}' is only for cancel")
    if isinstance(msg, Cancel) and msg.played_ms is not None and msg.played_ms < 0:
        raise ValueError("field 'played_ms' must be non-negative")


def parse_client(raw: str) -> ClientMessage:
    """One client text frame -> message; raises ProtocolError with the code the server answers."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise ProtocolError(INVALID_JSON, "message is not valid JSON (or is nested too deeply)") from None
    if not isinstance(body, dict):
        raise ProtocolError(INVALID_MESSAGE, "message must be a JSON object")
    context_id = body.get("context_id")
    if not isinstance(context_id, str) or context_id in ("", ALL_CONTEXTS) or not is_unicode(context_id) \
            or len(context_id.encode("utf-8")) > MAX_CONTEXT_ID_BYTES:
        context_id = None                   # an error about this message cannot name it
    kind = body.get("type")
    if not isinstance(kind, str):
        raise ProtocolError(INVALID_MESSAGE, f"field 'type' must be a string: one of {', '.join(CLIENT_MESSAGES)}",
                            context_id)
    cls = CLIENT_MESSAGES.get(kind)
    if cls is None:
        raise ProtocolError(UNKNOWN_TYPE, f"unknown message type {kind!r:.40}; "
                                          f"expected one of {', '.join(CLIENT_MESSAGES)}", context_id)
    try:
        msg = _build(cls, body)
        _check_client(msg)
    except ValueError as exc:
        raise ProtocolError(INVALID_MESSAGE, f"{cls.type}: {exc}", context_id) from None
    return msg


def parse_server(frame: str | bytes) -> ServerMessage:
    """One server frame (JSON text or binary audio) -> message: for clients."""
    if isinstance(frame, bytes):
        return unpack_audio(frame)
    body = json.loads(frame)
    cls = SERVER_MESSAGES[body.pop("type")]
    if cls is Audio:
        body["data"] = base64.b64decode(body["data"])
    return cls(**{f.name: body[f.name] for f in fields(cls) if f.name in body})
