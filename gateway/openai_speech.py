"""POST /v1/audio/speech as OpenAI defines it: formats, streaming (chunked bytes or SSE), voice names, speed."""
import base64

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from engine import SynthesisRequest
from qwen_tts_client import protocol as p

from .body import body_field, read_json
from .containers import FORMATS, SIZED, ContainerEncoder
from .http_api import ApiError, api
from .speech_body import StreamedSpeech, audio_body, opened
from .engine_stream import EngineStream
from .tempo import MAX_SPEED, MIN_SPEED
from .text_filter import FILTERS, Filters
from .voice_map import resolve

UNSUPPORTED_FORMAT = "unsupported_format"
STREAM_FORMATS = ("audio", "sse")
STREAMING_CLIENT = "x-stainless-raw-response"     # the OpenAI Python SDK sends "stream" with `with_streaming_response`


@api
async def speech(request: Request, gateway) -> Response:
    body = await read_json(request, gateway.config.max_message_bytes)
    text, fmt = body_field(body, "input", str), body_field(body, "response_format", str) or "mp3"
    if not text:
        raise ApiError(p.INVALID_REQUEST, "'input' is required")
    spoken = Filters(*(body_field(body, f"filter_{name}", bool, False) for name in FILTERS)).apply(text)  # if asked
    if spoken != text and not spoken.strip():
        raise ApiError(p.EMPTY_TEXT, "'input' holds nothing to speak once filtered")
    if fmt not in FORMATS:
        raise ApiError(UNSUPPORTED_FORMAT, f"response_format must be one of {', '.join(FORMATS)}")
    stream_format = body_field(body, "stream_format", str) or "audio"
    if stream_format not in STREAM_FORMATS:
        raise ApiError(p.INVALID_REQUEST, f"stream_format must be one of {', '.join(STREAM_FORMATS)}")
    speed = body_field(body, "speed", (int, float), 1.0)
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise ApiError(p.INVALID_REQUEST, f"speed must be from {MIN_SPEED} to {MAX_SPEED}")
    streamed = body_field(body, "stream", bool, False) or request.headers.get(STREAMING_CLIENT) == "stream" \
        or stream_format == "sse" or fmt not in SIZED
    synthesis = SynthesisRequest(text=spoken, voice=_voice(body, gateway), max_frames=gateway.config.max_frames,
                                 language=body_field(body, "language", str, "auto"),
                                 instruct=body_field(body, "instructions", str) or None, non_streaming_text=None)
    encoder = ContainerEncoder(fmt, streamed, float(speed), gateway.engine.info["sample_rate"])
    stream = EngineStream(gateway.engine, gateway.metrics, synthesis, "http")
    first, pieces = await opened(stream, encoder.encode)      # a whole response is all in `first`
    if stream_format == "sse":
        return StreamedSpeech(stream, _events(first, pieces, stream), "text/event-stream")
    if streamed:
        return StreamedSpeech(stream, audio_body(first, pieces), encoder.media_type)
    return Response(first, media_type=encoder.media_type)


def _voice(body: dict, gateway) -> str | None:
    custom = body.get("voice")                   # a name, or the SDK's custom-voice object {"id": NAME}
    voice = body_field(custom, "id", str) if isinstance(custom, dict) else body_field(body, "voice", str)
    takes_voice = gateway.engine.info["model_type"] != "voice_design"
    return resolve(voice, gateway.config.voice_map, gateway.voices(), takes_voice)


async def _events(first: bytes, pieces, stream: EngineStream):
    """OpenAI's SSE: speech.audio.delta per piece, then speech.audio.done (usage counts codec frames)."""
    async for data in audio_body(first, pieces):
        yield _event({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")})
    if stream.finish_reason is not None:
        frames = stream.frames
        usage = {"input_tokens": 0, "output_tokens": frames, "total_tokens": frames}
        yield _event({"type": "speech.audio.done", "usage": usage})


def _event(body: dict) -> str:
    return f"data: {p.to_json(body)}\n\n"


routes = [Route("/v1/audio/speech", speech, methods=["POST"])]
