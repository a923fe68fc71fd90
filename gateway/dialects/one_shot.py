"""The dialects' one-shot HTTP speech: Cartesia's `POST /tts/bytes`, ElevenLabs' `POST /v1/text-to-speech/{voice_id}`
(and `/stream`): raw audio streamed as the engine makes it, in the dialect's format; errors in its shape."""
from starlette.requests import Request
from starlette.responses import Response

from engine import SynthesisRequest
from qwen_tts_client import protocol as p

from ..audio import AudioEncoder
from ..body import body_field, read_json
from ..http_api import STATUS, ApiError, ErrorShape, api
from ..speech_body import StreamedSpeech, audio_body, opened
from ..engine_stream import EngineStream
from . import cartesia, elevenlabs
from .settings import language, to_f32le

MEDIA = {"pcm_s16le": "audio/pcm", "mulaw": "audio/basic", "alaw": "audio/x-alaw-basic"}
CARTESIA = ErrorShape(cartesia.error_body, {**STATUS, **cartesia.STATUS}, "x-api-key")
ELEVENLABS = ErrorShape(lambda code, message: {"detail": {"status": code, "message": message}}, STATUS, "xi-api-key")


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


def speech(parse, shape: ErrorShape):
    """`parse(request, body, gateway)` -> text, voice, language, format, `post(data, final)` (what the dialect makes
    of our encoder's bytes: float PCM, MP3; or None) and the media type."""
    async def endpoint(request: Request, gateway) -> Response:
        body = await read_json(request, gateway.config.max_message_bytes)
        text, voice, lang, fmt, post, media = parse(request, body, gateway)
        if not text:
            raise ApiError(p.EMPTY_TEXT, "the text to speak is empty")
        synthesis = SynthesisRequest(text=text, voice=voice, language=language(lang) or "auto",
                                     max_frames=gateway.config.max_frames)
        stream = EngineStream(gateway.engine, gateway.metrics, synthesis, "http")
        encoder = AudioEncoder(fmt.sample_rate, fmt.encoding, gateway.engine.info["sample_rate"])

        def encode(pcm, final: bool) -> bytes:
            data = b"".join(data for data, _ in encoder.encode(pcm, final))
            return post(data, final) if post else data

        first, pieces = await opened(stream, encode)
        served = {"x-served-model": gateway.engine.info["model"]}
        return StreamedSpeech(stream, audio_body(first, pieces), media, served)
    return api(endpoint, shape)
