"""HTTP API: OpenAI-compatible POST /v1/audio/speech (whole or streamed) and clone-voice management."""
import asyncio
import base64
import logging
import re
import tempfile

import numpy as np
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from engine import EngineInputError, SynthesisRequest, VoiceRef
from engine.audio_io import read_wav
from qwen_tts_client import protocol as p

from .audio import SOURCE_RATE, to_pcm16, wav_header
from .body import read_json
from .streams import EngineStream

log = logging.getLogger("qwen_tts_gateway")
MEDIA_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm"}
VOICE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_REFERENCE_SECONDS = 60
UNSUPPORTED_FORMAT, INVALID_AUDIO, VOICE_EXISTS, NOT_FOUND = "unsupported_format", "invalid_audio", "voice_exists", \
    "not_found"
STATUS = {p.UNAUTHORIZED: 401, NOT_FOUND: 404, VOICE_EXISTS: 409, p.MESSAGE_TOO_LARGE: 413, p.BUSY: 503,
          p.NOT_READY: 503, p.SHUTTING_DOWN: 503, p.INTERNAL: 500}


class ApiError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def error_response(gateway, code: str, message: str) -> Response:
    gateway.metrics.errors[code] += 1
    headers = {"Retry-After": "1"} if code in p.RETRYABLE else None
    body = p.to_json({"error": {"code": code, "message": message, "type": "invalid_request_error"}})
    return Response(body, STATUS.get(code, 400), headers, "application/json")


def api(handler):
    """Auth, readiness and error mapping around an HTTP handler."""
    async def endpoint(request: Request):
        gateway = request.app.state.gateway
        try:
            if not gateway.authorized(request.headers, request.query_params):
                raise ApiError(p.UNAUTHORIZED, "missing or wrong API key")
            if not gateway.ready:
                raise ApiError(p.SHUTTING_DOWN if gateway.draining else p.NOT_READY,
                               f"server not ready ({gateway.status}); retry shortly")
            return await handler(request, gateway)
        except (ApiError, EngineInputError, p.ProtocolError) as exc:
            return error_response(gateway, exc.code, str(exc))
        except Exception:
            log.exception("%s %s failed", request.method, request.url.path)
            return error_response(gateway, p.INTERNAL, "internal error; retry")
    return endpoint


def _field(body: dict, name: str, kind, default=None):
    value = body.get(name, default)
    if value is not None and not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ApiError(p.INVALID_REQUEST, f"'{name}' must be {kind.__name__}")
    if kind is str and value is not None and not p.is_unicode(value):
        raise ApiError(p.INVALID_REQUEST, f"'{name}' must be valid Unicode (it holds a lone surrogate)")
    return value


@api
async def speech(request: Request, gateway) -> Response:
    body = await read_json(request, gateway.config.max_message_bytes)
    text, fmt = _field(body, "input", str), _field(body, "response_format", str, "wav")
    if not text:
        raise ApiError(p.INVALID_REQUEST, "'input' is required")
    if fmt not in MEDIA_TYPES:
        raise ApiError(UNSUPPORTED_FORMAT, f"response_format must be one of {', '.join(MEDIA_TYPES)}")
    streamed = _field(body, "stream", bool, False)
    synthesis = SynthesisRequest(text=text, voice=_field(body, "voice", str), max_frames=gateway.config.max_frames,
                                 language=_field(body, "language", str, "auto"),
                                 instruct=_field(body, "instructions", str) or None)
    stream = EngineStream(gateway.engine, gateway.metrics, synthesis, "http")
    chunks = stream.chunks()
    try:
        pcm = [to_pcm16((await anext(chunks)).pcm).tobytes()]       # a refusal (busy) answers before any byte
        if streamed:
            return _StreamedSpeech(stream, _streamed(pcm[0], chunks, fmt), media_type=MEDIA_TYPES[fmt])
        pcm += [to_pcm16(chunk.pcm).tobytes() async for chunk in chunks]
    except EngineInputError:
        raise
    except Exception:
        log.exception("speech request failed")
        raise ApiError(p.INTERNAL, "the engine failed this request; retry") from None
    pcm = b"".join(pcm)
    header = wav_header(SOURCE_RATE, len(pcm)) if fmt == "wav" else b""
    return Response(header + pcm, media_type=MEDIA_TYPES[fmt])


class _StreamedSpeech(StreamingResponse):
    """Ends the engine request however the response ends, even if the body was never started (client gone)."""

    def __init__(self, stream: EngineStream, body, media_type: str):
        super().__init__(body, media_type=media_type)
        self.stream = stream

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self.stream.finish_reason is None:
                self.stream.cancel()


async def _streamed(first: bytes, chunks, fmt: str):
    try:
        if fmt == "wav":
            yield wav_header(SOURCE_RATE)
        yield first
        async for chunk in chunks:
            yield to_pcm16(chunk.pcm).tobytes()
    except Exception:
        log.exception("streamed speech request failed")    # the status is sent: the body just ends early


@api
async def list_voices(request: Request, gateway) -> JSONResponse:
    builtin = [{"name": name, "type": "builtin"} for name in gateway.engine.info["speakers"]]
    return JSONResponse({"voices": builtin + [{"name": n, "type": "clone"} for n in gateway.engine.voices.names()]})


@api
async def register_voice(request: Request, gateway) -> JSONResponse:
    """{name, audio: base64 WAV, text: its transcript, [x_vector_only]}: the clone conditioning is computed once."""
    body = await read_json(request, gateway.config.limits.max_body_bytes)
    name = _field(body, "name", str) or ""
    if not VOICE_NAME.fullmatch(name):
        raise ApiError(p.INVALID_REQUEST, "'name' must be 1-64 characters of letters, digits, '_', '.', '-'")
    if name.lower() in gateway.engine.info["speakers"]:
        raise ApiError(VOICE_EXISTS, f"'{name}' is a built-in voice")
    try:
        audio, rate = await asyncio.to_thread(_read_wav, _field(body, "audio", str) or "")
    except Exception as exc:                       # base64, RIFF and sample-format errors alike
        raise ApiError(INVALID_AUDIO, f"'audio' must be a base64 WAV file ({exc})") from None
    if not len(audio) or len(audio) > MAX_REFERENCE_SECONDS * rate:
        raise ApiError(INVALID_AUDIO, f"reference audio must be 0-{MAX_REFERENCE_SECONDS} s long")
    ref = VoiceRef(audio.astype(np.float32), rate, _field(body, "text", str),
                   x_vector_only=_field(body, "x_vector_only", bool, False))
    try:
        await gateway.engine.register_voice(name, ref)
    except (EngineInputError, ApiError):
        raise
    except Exception as exc:
        log.exception("voice registration failed")
        raise ApiError(p.INTERNAL, f"computing the voice failed: {exc}") from None
    return JSONResponse({"name": name, "type": "clone"}, status_code=201)


def _read_wav(data: str) -> tuple[np.ndarray, int]:
    with tempfile.NamedTemporaryFile(suffix=".wav") as f:     # read_wav takes a path
        f.write(base64.b64decode(data, validate=True))
        f.flush()
        return read_wav(f.name)


@api
async def delete_voice(request: Request, gateway) -> Response:
    name = request.path_params["name"]
    if not await gateway.engine.delete_voice(name):
        raise ApiError(NOT_FOUND, f"no registered voice '{name}'")
    return Response(status_code=204)


routes = [Route("/v1/audio/speech", speech, methods=["POST"]),
          Route("/v1/voices", list_voices, methods=["GET"]),
          Route("/v1/voices", register_voice, methods=["POST"]),
          Route("/v1/voices/{name}", delete_voice, methods=["DELETE"])]
