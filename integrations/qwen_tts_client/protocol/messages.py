"""Every message of the protocol as a dataclass, client -> server and server -> client."""
from dataclasses import dataclass
from typing import ClassVar

from .codes import RETRYABLE, WORDS_ONLY

PROTOCOL_VERSION = 1
ALL_CONTEXTS = "*"
MAX_CONTEXT_ID_BYTES = 255
TEXT_LAYOUTS = ("streaming", "whole")   # text fed one token a frame, or all of it in the prompt at the utterance's end
LANGUAGE_CODES = {"zh": "chinese", "en": "english", "de": "german", "it": "italian", "pt": "portuguese",  # ISO 639-1
                  "es": "spanish", "ja": "japanese", "ko": "korean", "fr": "french", "ru": "russian"}


class ProtocolError(Exception):
    def __init__(self, code: str, message: str, context_id: str | None = None):
        super().__init__(message)
        self.code, self.message, self.context_id = code, message, context_id

    def to_message(self) -> "Error":
        return Error(self.code, self.message, self.code in RETRYABLE, self.context_id)


# client -> server
@dataclass
class Text:
    type: ClassVar[str] = "text"
    context_id: str
    text: str
    voice: str | None = None
    language: str | None = None
    instruct: str | None = None
    word_timestamps: bool = True
    filter_think: bool = True         # <think>...</think> blocks are not spoken
    filter_markdown: bool = True      # markdown is spoken as its text (emphasis, headings, bullets, fences, links)
    filter_emoji: bool = True         # emoji are not spoken
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    text_layout: str | None = None    # one of TEXT_LAYOUTS; None: whole text layout only where `end` is set here
    end: bool = False                 # this text is the context's last, as if `end` followed it


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


# server -> client
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
    """A context's last message: done, cancelled, or an error about it (except those about its words only)."""
    return isinstance(msg, (Done, Cancelled)) or isinstance(msg, Error) and msg.context_id is not None \
        and msg.code not in WORDS_ONLY
