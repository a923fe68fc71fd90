"""An HTTP request's JSON body, refused (413) before it is read when too large; and its fields, checked."""
import json

from starlette.requests import Request

from qwen_tts_client import protocol as p


async def read_body(request: Request, limit: int) -> bytes:
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise p.ProtocolError(p.MESSAGE_TOO_LARGE, f"request body exceeds {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise p.ProtocolError(p.MESSAGE_TOO_LARGE, f"request body exceeds {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, limit: int) -> dict:
    return parse_json(await read_body(request, limit))


def parse_json(data: bytes) -> dict:
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        raise p.ProtocolError(p.INVALID_JSON, "request body is not valid JSON (or is nested too deeply)") from None
    if not isinstance(body, dict):
        raise p.ProtocolError(p.INVALID_REQUEST, "request body must be a JSON object")
    return body


def body_field(body: dict, name: str, kind, default=None):
    """The field checked against `kind`; absent or null: `default`."""
    value = body.get(name)
    if value is None:
        return default
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
        raise p.ProtocolError(p.INVALID_REQUEST, f"'{name}' must be {' or '.join(k.__name__ for k in kinds)}")
    if isinstance(value, str) and not p.is_unicode(value):
        raise p.ProtocolError(p.INVALID_REQUEST, f"'{name}' must be valid Unicode (it holds a lone surrogate)")
    return value
