"""JSON text frames: encoding, and parsing client and server frames."""
import base64
import json
import math
import sys
from dataclasses import MISSING, asdict, fields
from typing import get_type_hints

from .audio_frames import unpack_audio
from .codes import INVALID_JSON, INVALID_MESSAGE, UNKNOWN_TYPE
from .messages import (ALL_CONTEXTS, CLIENT_MESSAGES, MAX_CONTEXT_ID_BYTES, SERVER_MESSAGES, TEXT_LAYOUTS, Audio,
                       Cancel, ClientMessage, ProtocolError, ServerMessage, Text)

try:
    from orjson import loads as piece_loads      # the gateway's (a dependency): a third of json's cost on a piece
except ImportError:                              # a client package without it
    piece_loads = json.loads


def encode(message: ServerMessage | ClientMessage) -> str:
    """A client message holds only the fields that differ from their defaults: a text piece is three fields."""
    defaults = _DEFAULTS.get(type(message))
    if defaults is not None:
        return to_json({"type": message.type, **{name: value for name, value in message.__dict__.items()
                                                 if defaults.get(name, MISSING) is not value}})
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
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_KINDS = {str: str, bool: bool, int: int, float: (int, float)}


def _field_type(hint) -> tuple[type, bool]:
    """A field's type hint -> (its type, whether None is allowed)."""
    args = getattr(hint, "__args__", (hint,))
    return next(t for t in args if t is not type(None)), type(None) in args


def _check_field(name: str, spec: tuple[type, bool], value):
    typ, optional = spec
    if value is None and optional:
        return None
    kind = _KINDS[typ]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ValueError(f"field '{name}' must be {typ.__name__}")
    if kind is str and not is_unicode(value):
        raise ValueError(f"field '{name}' must be valid Unicode (it holds a lone surrogate)")
    if typ is float:
        value = float(value) if abs(value) <= sys.float_info.max else math.inf   # (a huge int overflows)
        if not math.isfinite(value):
            raise ValueError(f"field '{name}' must be finite")
    return value


def _build(cls, body: dict):
    """Only the fields the body holds are checked: a text piece costs its two fields, not the message's twenty."""
    for name in _REQUIRED[cls]:
        if name not in body:
            raise ValueError(f"missing field '{name}'")
    specs, unset = _FIELDS[cls], _NONE_DEFAULTS[cls]
    return cls(**{name: _check_field(name, specs[name], value) for name, value in body.items()
                  if name in specs and not (value is None and name in unset)})


_FIELDS = {cls: {f.name: _field_type(get_type_hints(cls)[f.name]) for f in fields(cls)}
           for cls in CLIENT_MESSAGES.values()}
_REQUIRED = {cls: [f.name for f in fields(cls) if f.default is MISSING] for cls in CLIENT_MESSAGES.values()}
_DEFAULTS = {cls: {f.name: f.default for f in fields(cls) if f.default is not MISSING}    # None, True or False
             for cls in CLIENT_MESSAGES.values()}
_NONE_DEFAULTS = {cls: {f.name for f in fields(cls) if f.default is None} for cls in CLIENT_MESSAGES.values()}


def _check_client(msg: ClientMessage) -> None:
    cid = msg.context_id
    if cid is not None and not 0 < len(cid.encode("utf-8")) <= MAX_CONTEXT_ID_BYTES:
        raise ValueError(f"context_id must be 1 to {MAX_CONTEXT_ID_BYTES} bytes of UTF-8")
    if cid == ALL_CONTEXTS and not isinstance(msg, Cancel):
        raise ValueError(f"context_id '{ALL_CONTEXTS}' is only for cancel")
    if isinstance(msg, Cancel) and msg.played_ms is not None and msg.played_ms < 0:
        raise ValueError("field 'played_ms' must be non-negative")
    if isinstance(msg, Text) and msg.text_layout not in (None, *TEXT_LAYOUTS):
        raise ValueError(f"field 'text_layout' must be one of {', '.join(TEXT_LAYOUTS)}")


def parse_client(raw: str) -> ClientMessage:
    """One client text frame -> message; raises ProtocolError with the code the server answers."""
    if (piece := _text_piece(raw)) is not None:
        return piece
    try:                                   # the rest, errors included, as the standard parser reads it
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise ProtocolError(INVALID_JSON, "message is not valid JSON (or is nested too deeply)") from None
    if not isinstance(body, dict):
        raise ProtocolError(INVALID_MESSAGE, "message must be a JSON object")
    context_id = _context_id(body.get("context_id"))     # None: an error about this message cannot name it
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


def _context_id(value) -> str | None:
    """`value` if it can name a context, else None."""
    if not isinstance(value, str) or value in ("", ALL_CONTEXTS) or not is_unicode(value) \
            or (len(value) if value.isascii() else len(value.encode("utf-8"))) > MAX_CONTEXT_ID_BYTES:
        return None
    return value


def _text_piece(raw: str) -> Text | None:
    """The usual message, {type, context_id, text}, valid: the message; else None (the full check says why). orjson
    reads such a message's strings as json does: what it refuses or reads otherwise (NaN, huge ints) is no piece."""
    try:
        body = piece_loads(raw)
    except (ValueError, RecursionError):
        return None
    if type(body) is not dict or len(body) != 3 or body.get("type") != "text":
        return None
    cid, text = _context_id(body.get("context_id")), body.get("text")
    return Text(cid, text) if cid is not None and type(text) is str and is_unicode(text) else None


def parse_server(frame: str | bytes) -> ServerMessage:
    if isinstance(frame, bytes):
        return unpack_audio(frame)
    body = json.loads(frame)
    cls = SERVER_MESSAGES[body.pop("type")]
    if cls is Audio:
        body["data"] = base64.b64decode(body["data"])
    return cls(**{f.name: body[f.name] for f in fields(cls) if f.name in body})
