"""What every route shares: the engine core (started and warmed up in the background), metrics, sessions."""
import asyncio
import hmac
import logging
import time
from dataclasses import dataclass, field
from typing import Mapping

from engine import REAL_CLOCK, Clock
from engine.core.startup import report
from qwen_tts_client import protocol as p

from . import fatal
from .engine_process import EngineClient
from .frontend_reports import FrontendReports
from .limits import Limits
from .metrics import Metrics
from .reference_audio import ReferenceDecoder
from .voice_map import OPENAI_VOICES

log = logging.getLogger("qwen_tts_gateway")


@dataclass
class GatewayConfig:
    api_keys: tuple[str, ...] = ()
    max_sockets: int = 4096
    max_contexts_per_socket: int = 16
    context_timeout: float = 20.0
    max_message_bytes: int = 65536
    max_utterance_chars: int = 5000      # an utterance's text (between flushes)
    max_frames: int | None = None        # cap on every utterance (12.5 frames = 1 s); None: the engine's text budget
    shutdown_grace: float = 10.0
    aligner_timeout: float | None = None  # an alignment job slower than this ends the context's words (None: by device)
    voice_map: dict[str, str] = field(default_factory=lambda: dict(OPENAI_VOICES))   # HTTP: OpenAI names -> voices
    limits: Limits = field(default_factory=Limits)
    workers: int = 1                     # the server's front-end processes, this one among them


class Gateway:
    def __init__(self, config: GatewayConfig, engine: EngineClient, clock: Clock = REAL_CLOCK):
        """`clock`: what the sockets' timers, idle release, slow consumers and word pacing read."""
        self.config, self.engine, self.clock = config, engine, clock
        self.status = "loading"              # loading -> ready -> shutting_down (or failed)
        self.metrics = Metrics()
        engine.arrived = self.metrics.arrived      # how long the engine core's chunks take to reach this front end
        self.sessions: set = set()
        self.open_contexts = 0
        self.reporter: asyncio.Task | None = None
        self.frontends: list = []            # serve's other front-end processes (frontends.py), stopped with this one
        self.url: str | None = None          # serve's address, logged once every front end serves
        self.failure: str | None = None      # why the engine core failed, in one line
        self.reference_audio = ReferenceDecoder()
        self.started = time.perf_counter()
        self.reports = FrontendReports(engine.address, engine.identity.hex()) if config.workers > 1 else None

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def serving(self) -> bool:
        return self.ready and len(self.other_reports()) >= self.config.workers - 1

    def other_reports(self) -> list[dict]:
        """The other front ends' metrics (serve --workers)."""
        return self.reports.others() if self.reports else []

    @property
    def draining(self) -> bool:
        return self.status == "shutting_down"

    @property
    def aligner(self):
        return self.engine.aligner

    @property
    def aligner_timeout(self) -> float:
        """5 s on a GPU; 60 s on a CPU, where a published-size aligner takes ~17 s a job on two cores."""
        timeout = self.config.aligner_timeout
        return timeout if timeout is not None else 5.0 if self.engine.info.get("device") == "cuda" else 60.0

    async def start(self) -> None:
        try:
            t0 = time.perf_counter()
            log.info("starting the engine core...")
            await self.engine.start()
            self.engine.on_failure = self._failed
            report("engine core ready", time.perf_counter() - t0, self.engine.info["model"])
            self.status = "ready"
            self.reporter = asyncio.create_task(self._report())
        except Exception as exc:
            self.failure = fatal.log_failure(log, exc)
            self.status = "failed"

    async def _report(self) -> None:
        announced = self.url is None
        while True:
            if self.reports:
                try:
                    self.reports.publish(self.metrics.snapshot(sockets=len(self.sessions), contexts=self.open_contexts))
                except OSError as exc:          # a full disk for a moment: the next second's report replaces it
                    log.warning("this front end's metrics report was not written: %s", exc)
            if not announced and self.serving and "max_active" in self.engine.stats():
                announced = True
                log.info("listening on %s (%d front ends, model %s, %d streams)", self.url, self.config.workers,
                         self.engine.info["model"], self.engine.stats().get("max_active", 0))
                report("serving", time.perf_counter() - self.started, "every front end up")
            await asyncio.sleep(1.0)

    def _failed(self, reason: str) -> None:
        """The engine core died: its requests fail (`internal`), /health answers 503, and the server exits."""
        log.error("%s: the gateway stops", reason)
        self.failure, self.status = reason, "failed"

    def voices(self) -> list[str]:
        return list(self.engine.info["speakers"]) + self.engine.voice_names()

    def authorized(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        if not self.config.api_keys:
            return True
        auth = headers.get("authorization", "")
        key = auth[7:] if auth[:7].lower() == "bearer " else query.get("api_key", "")
        return any(hmac.compare_digest(key.encode(), k.encode()) for k in self.config.api_keys)

    async def drain(self) -> None:
        """Graceful shutdown: refuse new work, give closed text shutdown_grace s, then end contexts and close (1001)."""
        if self.status == "failed":
            for session in list(self.sessions):
                await session.shutdown("the engine failed", p.INTERNAL)
            return
        self.status = "shutting_down"
        deadline = time.monotonic() + self.config.shutdown_grace
        while time.monotonic() < deadline and any(c.owes_audio for s in self.sessions for c in s.contexts.values()):
            await asyncio.sleep(0.05)
        await asyncio.gather(*[session.shutdown("server shutting down") for session in list(self.sessions)])

    async def close(self) -> None:
        if self.reporter is not None:
            self.reporter.cancel()
        if self.reports:
            self.reports.withdraw()
        self.reference_audio.close()
        await self.engine.close()
