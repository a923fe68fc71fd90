"""HTTP API: what every route shares (auth, readiness, errors) and clone-voice management."""
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engine import EngineInputError, VoiceRef
from engine.api.voice_input import check_reference, check_voice_name
from qwen_tts_client import protocol as p

from .body import read_body

log = logging.getLogger("qwen_tts_gateway")
VOICE_EXISTS, NOT_FOUND = "voice_exists", "not_found"
STATUS = {p.UNAUTHORIZED: 401, NOT_FOUND: 404, VOICE_EXISTS: 409, p.MESSAGE_TOO_LARGE: 413, p.BUSY: 503,
          p.NOT_READY: 503, p.SHUTTING_DOWN: 503, p.INTERNAL: 500}


class ApiError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def openai_error(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message, "type": "invalid_request_error"}}


@dataclass(frozen=True)
class ErrorShape:
    """How a family of routes answers an error: its body, its statuses, where its key comes (None: Authorization)."""
    body: Callable[[str, str], dict] = openai_error
    status: Mapping[str, int] = field(default_factory=lambda: STATUS)
    key_header: str | None = None


OPENAI = ErrorShape()


def error_response(gateway, code: str, message: str, shape: ErrorShape = OPENAI) -> Response:
    gateway.metrics.errors[code] += 1
    headers = {"Retry-After": "1"} if code in p.RETRYABLE else None
    return Response(p.to_json(shape.body(code, message)), shape.status.get(code, 400), headers, "application/json")


def api(handler, shape: ErrorShape = OPENAI):
    """Every HTTP route: its key, readiness (shutting_down while draining), its errors in the route's shape."""
    async def endpoint(request: Request):
        gateway = request.app.state.gateway
        headers, query = request.headers, request.query_params
        if shape.key_header:
            headers, query = auth_headers(headers, query, shape.key_header), {}
        try:
            if not gateway.authorized(headers, query):
                raise ApiError(p.UNAUTHORIZED, "missing or wrong API key")
            if not gateway.ready:
                raise ApiError(p.SHUTTING_DOWN if gateway.draining else p.NOT_READY,
                               f"server not ready ({gateway.status}); retry shortly")
            return await handler(request, gateway)
        except (ApiError, EngineInputError, p.ProtocolError) as exc:
            return error_response(gateway, exc.code, str(exc), shape)
        except Exception:
            log.exception("%s %s failed", request.method, request.url.path)
            return error_response(gateway, p.INTERNAL, "internal error; retry", shape)
    return endpoint


def auth_headers(headers, query, key_header: str) -> dict:
    """A dialect's key (its header, or `api_key` in the query) as the `Authorization` our admission checks."""
    key = headers.get(key_header) or query.get("api_key")
    return {"authorization": f"Bearer {key}"} if key else dict(headers)


@api
async def list_voices(request: Request, gateway) -> JSONResponse:
    builtin = [{"name": name, "type": "builtin"} for name in gateway.engine.info["speakers"]]
    return JSONResponse({"voices": builtin + [{"name": n, "type": "clone"} for n in gateway.engine.voice_names()]})


@api
async def register_voice(request: Request, gateway) -> JSONResponse:
    """{name, audio: base64 WAV, text, [x_vector_only]}: the clone conditioning is computed once."""
    rate = gateway.engine.info["sample_rate"]
    body = await gateway.reference_audio.registration(await read_body(request, gateway.config.limits.max_body_bytes),
                                                      rate)
    name = body["name"]
    if name.lower() in gateway.engine.info["speakers"]:
        raise ApiError(VOICE_EXISTS, f"'{name}' is a built-in voice")
    ref = VoiceRef(body["audio"], rate, body["text"], x_vector_only=body["x_vector_only"])
    check_reference(ref)
    try:
        await gateway.engine.register_voice(name, ref)
    except (EngineInputError, ApiError):
        raise
    except Exception as exc:
        log.exception("voice registration failed")
        raise ApiError(p.INTERNAL, f"computing the voice failed: {exc}") from None
    return JSONResponse({"name": name, "type": "clone"}, status_code=201)


@api
async def delete_voice(request: Request, gateway) -> Response:
    name = request.path_params["name"]
    check_voice_name(name)
    if not await gateway.engine.delete_voice(name):
        raise ApiError(NOT_FOUND, f"no registered voice {name!r}")
    return Response(status_code=204)


routes = [Route("/v1/voices", list_voices, methods=["GET"]),
          Route("/v1/voices", register_voice, methods=["POST"]),
          Route("/v1/voices/{name:path}", delete_voice, methods=["DELETE"])]       # any name: its own JSON 400
