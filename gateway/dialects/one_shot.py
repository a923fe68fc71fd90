"""The dialects' one-shot HTTP speech: Cartesia's `POST /tts/bytes`, ElevenLabs' `POST /v1/text-to-speech/{voice_id}`
(and `/stream`): raw audio streamed as the engine makes it, in the dialect's format; errors in its shape."""
import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engine import EngineInputError, SynthesisRequest
from qwen_tts_client import protocol as p

from ..audio import AudioEncoder
from ..body import body_field, read_json
from ..http_api import STATUS
from ..openai_speech import _StreamedSpeech, _rest
from ..streams import EngineStream
from . import cartesia, elevenlabs
from .bridge import DialectError
from .settings import auth_headers, language, to_f32le

log = logging.getLogger("qwen_tts_gateway")
MEDIA = {"pcm_s16le": "audio/pcm", "mulaw": "audio/basic", "alaw": "audio/x-alaw-basic"}


def cartesia_request(request: Request, body: dict, gateway):
    encoding, rate = cartesia.output_format(body.get("output_format"))
    fmt = p.StreamFormat(rate, cartesia.ENCODINGS[encoding], "binary")
    post = (lambda data, final: to_f32le(data)) if encoding == "pcm_f32le" else None
    return (body_field(body, "transcript", str), cartesia.voice_name(gateway, body.get("voice")),
            body_field(body, "language", str), fmt, post, MEDIA[fmt.encoding])


def elevenlabs_request(request: Request, body: dict, gateway):
    fmt, kbps = elevenlabs.stream_format(request.query_params.get("output_format"))
    post = elevenlabs.Mp3(fmt.sample_rate, kbps).encode if kbps else None
    return (body_field(body, "text", str), elevenlabs.voice_name(gateway, request.path_params["voice_id"]),
            body_field(body, "language_code", str), fmt, post, "audio/mpeg" if kbps else MEDIA[fmt.encoding])


def speech(parse, key_header: str, error_body):
    async def endpoint(request: Request) -> Response:
        gateway = request.app.state.gateway
        try:
            if not gateway.authorized(auth_headers(request.headers, request.query_params, key_header), {}):
                raise DialectError(p.UNAUTHORIZED, "missing or wrong API key")
            if not gateway.ready:
                raise DialectError(p.NOT_READY, f"server not ready ({gateway.status}); retry shortly")
            body = await read_json(request, gateway.config.max_message_bytes)
            text, voice, lang, fmt, post, media = parse(request, body, gateway)
            if not text:
                raise DialectError(p.EMPTY_TEXT, "the text to speak is empty")
            synthesis = SynthesisRequest(text=text, voice=voice, language=language(lang) or "auto",
                                         max_frames=gateway.config.max_frames)
            return await _respond(gateway, synthesis, fmt, post, media)
        except (DialectError, EngineInputError, p.ProtocolError) as exc:
            gateway.metrics.errors[exc.code] += 1
            return JSONResponse(error_body(exc.code, str(exc)), STATUS.get(exc.code, 400))
        except Exception:
            log.exception("%s %s failed", request.method, request.url.path)
            return JSONResponse(error_body(p.INTERNAL, "internal error; retry"), 500)
    return endpoint


async def _respond(gateway, synthesis: SynthesisRequest, fmt: p.StreamFormat, post, media: str) -> Response:
    """`post(data, final)`: what the dialect makes of our encoder's bytes (float PCM, MP3), or None."""
    stream = EngineStream(gateway.engine, gateway.metrics, synthesis, "http")
    encoder = AudioEncoder(fmt.sample_rate, fmt.encoding, gateway.engine.info["sample_rate"])

    async def pieces():
        async for chunk in stream.chunks():
            data = b"".join(data for data, _ in encoder.encode(chunk.pcm, chunk.final))
            if post:
                data = post(data, chunk.final)
            if data:
                yield data

    audio = pieces()
    try:
        first = await anext(audio, b"")         # a refusal (busy, unknown voice) answers before any byte
    except BaseException:
        stream.cancel()
        raise
    response = _StreamedSpeech(stream, _rest(first, audio), media)
    response.headers["x-served-model"] = gateway.engine.info["model"]
    return response


def elevenlabs_error(code: str, message: str) -> dict:
    return {"detail": {"status": code, "message": message}}


def cartesia_error(code: str, message: str) -> dict:
    return cartesia.error_body(code, message)
