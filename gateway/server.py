"""The ASGI app (WebSocket, health, metrics, HTTP API, playground) and a uvicorn server that drains first."""
import asyncio
from contextlib import asynccontextmanager
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket

from qwen_tts_client import protocol as p

from . import dialects, http_api, log_filters, openai_speech
from .app_state import Gateway
from .session import Session

STATIC = Path(__file__).parent / "static"           # the playground's page, script and style
GPU_STAGES = {      # the engine's GPU timeline, moving averages over its recent steps (CUDA only)
    "step": "GPU ms of a step on the main stream, its first stage's start to its last end (the side decode apart)",
    "idle": "GPU ms the main stream waits before a step (the host not ahead of the device)",
    **{stage: f"GPU ms of the step's {stage} stage" for stage in ("start", "prefill", "predict", "decode", "talk")}}
# /metrics' aligner gauges: (name, the engine core's stats key: aligner_ and the service's own, help)
ALIGNER_GAUGES = (
    ("tts_aligner_queued_jobs", "aligner_queued", "word alignment jobs waiting for the aligner"),
    ("tts_aligner_busy_seconds", "aligner_busy_seconds", "time spent aligning, cumulative"),
    ("tts_aligner_audio_seconds", "aligner_audio_seconds", "audio aligned, cumulative (windows overlap)"),
    ("tts_aligner_refused_contexts", "aligner_refused", "contexts refused word timestamps (words_refused), cumulative"),
    ("tts_aligner_refused_behind_contexts", "aligner_refused_behind",
     "of those, refused because words came too late (the rest: no device time left), cumulative"),
    ("tts_aligner_device_seconds", "aligner_device_seconds",
     "the aligner's device time (its turns, and where a batch's mel queued beside a step outlasted it), cumulative"),
    ("tts_aligner_turns", "aligner_turns", "turns the aligner took, cumulative"),
    ("tts_aligner_batches", "aligner_batches", "batches the aligner ran, cumulative"),
    ("tts_aligner_jobs", "aligner_jobs", "alignment jobs done, cumulative"),
    ("tts_aligner_queued_seconds", "aligner_queued_seconds", "time jobs waited for their batch, cumulative"),
    ("tts_aligner_turn_wait_seconds", "aligner_turn_wait_seconds",
     "time the aligner waited for a turn between steps, cumulative"),
    ("tts_aligner_turns_returned", "aligner_turns_returned",
     "turns asked for before a batch was cut that went unused (its first slice past the turn's budget, or withdrawn "
     "by the engine), cumulative"),
    ("tts_aligner_turn_host_seconds", "aligner_turn_host_seconds",
     "the host's time launching the aligner's work within its turns (the device may wait on it), cumulative"),
    ("tts_aligner_overdue_jobs", "aligner_overdue_jobs",
     "jobs already due when submitted (an utterance's opening words), cumulative"),
    ("tts_aligner_overdue_seconds", "aligner_overdue_seconds", "those jobs' time from submission to their words, cumulative"),
    ("tts_aligner_spans", "aligner_spans", "word spans aligned, cumulative (windows overlap)"),
    ("tts_aligner_spans_past_audio", "aligner_spans_past_audio", "of those, spans ending past their window's audio (clamped "
     "to its end: such a word settles only with its utterance's last job)"),
    ("tts_aligner_cost_ms_per_audio_s", "aligner_cost_ms", "learnt device ms a second of audio costs, at full batches"),
    ("tts_aligner_capacity", "aligner_capacity", "device seconds a second planned for alignment, recent"),
    ("tts_aligner_used", "aligner_used", "device seconds a second the aligner's turns took, over the last 2 s"),
)



async def tts_websocket(ws: WebSocket) -> None:
    gateway: Gateway = ws.app.state.gateway
    await ws.accept()
    try:
        if error := admission_error(gateway, ws.headers, ws.query_params):
            raise p.ProtocolError(error.code, error.message)
        fmt = p.StreamFormat.from_query(ws.query_params)
    except p.ProtocolError as exc:
        close_code = p.CLOSE_TRY_LATER if exc.code in p.RETRYABLE else p.CLOSE_POLICY
        return await _refuse(ws, exc.to_message(), close_code)
    await run_session(gateway, ws, fmt)


async def run_session(gateway: Gateway, ws, fmt: p.StreamFormat) -> None:
    """One socket's session (ours, or a dialect's over its DialectSocket), counted while it runs."""
    session = Session(gateway, ws, fmt)
    gateway.sessions.add(session)
    try:
        await session.run()
    finally:
        gateway.sessions.discard(session)


def admission_error(gateway: Gateway, headers, query) -> p.Error | None:
    """Why a new socket (ours or a dialect's) is refused: its key, the server's state, the socket limit."""
    if not gateway.authorized(headers, query):
        return p.Error(p.UNAUTHORIZED, "missing or wrong API key")
    if not gateway.ready:
        code = p.SHUTTING_DOWN if gateway.draining else p.NOT_READY
        return p.Error(code, f"server not ready ({gateway.status}); retry shortly", True)
    if len(gateway.sessions) >= gateway.config.max_sockets:
        return p.Error(p.BUSY, f"server busy: {gateway.config.max_sockets} sockets are open; retry shortly", True)
    return None


async def _refuse(ws: WebSocket, error: p.Error, close_code: int) -> None:
    ws.app.state.gateway.metrics.errors[error.code] += 1
    try:
        await ws.send_text(p.encode(error))
        await ws.close(close_code, error.message[:120])
    except Exception:
        pass                                     # the client left first


async def playground(request: Request) -> FileResponse:
    return FileResponse(STATIC / "index.html")


async def health(request: Request) -> JSONResponse:
    gateway: Gateway = request.app.state.gateway
    if not gateway.serving:
        return JSONResponse({"status": "warming_up" if gateway.ready else gateway.status}, status_code=503)
    stats = gateway.engine.stats()
    return JSONResponse({"status": "ready", **gateway.engine.info, "max_active": stats.get("max_active")})


async def metrics(request: Request) -> PlainTextResponse:
    gateway: Gateway = request.app.state.gateway
    stats, others = gateway.engine.stats(), gateway.other_reports()
    gauges = {
        "tts_ready": ("1 once the engine is loaded and warmed up", float(gateway.ready)),
        "tts_sockets": ("open WebSocket sessions", len(gateway.sessions) + sum(r["sockets"] for r in others)),
        "tts_active_contexts": ("open WebSocket contexts", gateway.open_contexts + sum(r["contexts"] for r in others)),
        "tts_generating_requests": ("engine requests admitted (limit: tts_max_active)", stats.get("active", 0)),
        "tts_max_active": ("admission limit (--max-active)", stats.get("max_active", 0)),
        "tts_refused_requests": ("requests refused with busy, cumulative", stats.get("refused", 0)),
        "tts_kv_tokens": ("KV cache size in tokens", stats.get("kv_tokens", 0)),
        "tts_kv_reserved_tokens": ("KV tokens admission holds for the admitted streams", stats.get("kv_reserved", 0)),
        "tts_kv_used_tokens": ("KV tokens in blocks taken", stats.get("kv_used", 0)),
        "tts_queued_requests": ("engine requests waiting for a batch slot", stats.get("waiting", 0)),
        "tts_admission_queue_length": ("requests queued for room (--max-queue-ms)", stats.get("queued", 0)),
        "tts_admission_queue_oldest_wait_ms": ("how long the queue's oldest request has waited",
                                          stats.get("queue_oldest_ms", 0.0)),
        "tts_admission_queued_requests": ("requests that waited in the queue, cumulative", stats.get("queued_total", 0)),
        "tts_admission_queue_expired_requests": ("queued requests refused with busy once past --max-queue-ms, "
                                              "cumulative", stats.get("queue_expired", 0)),
        "tts_admission_queue_wait_seconds": ("time queued requests waited before they joined, cumulative",
                                                   stats.get("queue_waited_s", 0.0)),
        "tts_admission_queue_max_wait_ms": ("the longest wait of a request that joined from the queue",
                                            stats.get("queue_max_waited_ms", 0.0)),
        "tts_engine_active": ("requests holding engine resources", stats.get("active", 0)),
        "tts_engine_step_ms": ("engine step wall time, moving average (capacity: --max-step-ms)",
                               stats.get("step_ms", 0.0)),
        "tts_engine_step_capacity_streams": ("streams the measured step line keeps within --max-step-ms (at most "
                                             "--max-active)", stats.get("step_capacity", 0)),
        "tts_engine_listener_dry_chunks": ("chunks sent after the listener ran out while its text was ready, "
                                           "cumulative", stats.get("listener_dry", 0)),
        "tts_engine_first_chunks": ("first chunks sent, cumulative", stats.get("first_chunks", 0)),
        "tts_engine_to_slot_seconds": ("of those streams, seconds from reaching the engine to taking a slot, "
                                       "cumulative", stats.get("to_slot_s", 0.0)),
        "tts_engine_to_first_chunk_seconds": ("of those streams, seconds from taking a slot to the first chunk, "
                                              "cumulative", stats.get("to_first_chunk_s", 0.0)),
        **{f"tts_engine_gpu_{name}_ms": (GPU_STAGES[name], ms) for name, ms in stats.get("gpu_ms", {}).items()
           if name in GPU_STAGES},
        "tts_engine_side_turns": ("turns of side work (alignment) between steps, cumulative",
                                  stats.get("turns_given", 0)),
        "tts_engine_side_turns_withdrawn": ("of those, withdrawn before their work began (its host work outlasted "
                                            "the turn's spare time), cumulative", stats.get("turns_withdrawn", 0)),
    }
    if gateway.aligner is not None:
        gauges.update({name: (text, stats.get(key, 0)) for name, key, text in ALIGNER_GAUGES})
    return PlainTextResponse(gateway.metrics.merged(others).render(gauges, gateway.engine.info),
                             media_type="text/plain; version=0.0.4")


def create_app(gateway: Gateway) -> Starlette:
    @asynccontextmanager
    async def lifespan(app):
        start = asyncio.create_task(gateway.start())
        yield
        start.cancel()
        await gateway.close()

    routes = [WebSocketRoute("/v1/tts/websocket", tts_websocket), Route("/health", health),
              Route("/metrics", metrics), *openai_speech.routes, *http_api.routes, *dialects.routes,
              Route("/", playground),
              Mount("/static", StaticFiles(directory=STATIC))]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.gateway = gateway
    return app


class GatewayServer(uvicorn.Server):
    """At shutdown uvicorn would close every WebSocket with 1012 at once: stop listening, then drain first."""

    def __init__(self, gateway: Gateway, config: uvicorn.Config):
        super().__init__(config)
        self.gateway = gateway

    async def on_tick(self, counter: int) -> bool:
        return await super().on_tick(counter) or self.gateway.status == "failed"

    async def shutdown(self, sockets=None) -> None:
        for server in self.servers:
            server.close()
        for frontend in self.gateway.frontends:        # they drain beside this one, then the core stops
            frontend.terminate()
        await self.gateway.drain()
        for frontend in self.gateway.frontends:
            await asyncio.to_thread(frontend.join, self.gateway.config.shutdown_grace + 5)
        await super().shutdown(sockets)


def uvicorn_config(app, host: str, port: int, gateway: Gateway, log_level: str = "info") -> uvicorn.Config:
    # no per-message deflate: PCM hardly compresses, and zlib at a thousand streams' rate would take a core
    limits = gateway.config.limits
    config = uvicorn.Config(app, host=host, port=port, ws="websockets-sansio", lifespan="on", log_level=log_level,
                            ws_max_size=16 * gateway.config.max_message_bytes, ws_per_message_deflate=False,
                            ws_ping_interval=limits.ws_ping_interval, ws_ping_timeout=limits.ws_ping_timeout,
                            timeout_graceful_shutdown=gateway.config.shutdown_grace)
    log_filters.install()            # after the config has set up uvicorn's loggers
    return config
