"""What every route shares: the engine (loaded and warmed up in the background), admission, metrics, sessions."""
import asyncio
import hmac
import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from aligner import AlignmentService
from engine import SamplingParams, SynthesisRequest, VoiceRef

from .limits import Limits
from .metrics import Metrics
from .streams import Admission

log = logging.getLogger("qwen_tts_gateway")


@dataclass
class GatewayConfig:
    api_keys: tuple[str, ...] = ()
    max_sockets: int = 1024
    max_contexts_per_socket: int = 16
    max_active: int = 32                 # generating requests (also the engine's max_seqs)
    max_step_ms: float | None = None     # refuse new streams while an engine step takes longer (None: no limit)
    context_timeout: float = 20.0
    max_message_bytes: int = 65536
    max_utterance_chars: int = 5000      # the engine re-reads an utterance's whole text on every append
    max_frames: int | None = None        # cap on every utterance (12.5 frames = 1 s); None: the engine's text budget
    shutdown_grace: float = 10.0
    aligner_timeout: float = 5.0         # an alignment job slower than this ends the context's word timestamps
    limits: Limits = field(default_factory=Limits)


class Gateway:
    def __init__(self, config: GatewayConfig, load_engine: Callable[[], object],
                 load_aligner: Callable[[object], object] | None = None):
        """`load_aligner(engine)`: the forced aligner (on the engine's device), or None: no word timestamps."""
        self.config, self.load_engine, self.load_aligner = config, load_engine, load_aligner
        self.engine = None
        self.aligner: AlignmentService | None = None
        self.status = "loading"              # loading -> warming_up -> ready -> shutting_down (or failed)
        self.admission = Admission(config.max_active, config.max_step_ms, lambda: self.engine.step_ms)
        self.metrics = Metrics()
        self.sessions: set = set()
        self.open_contexts = 0

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def draining(self) -> bool:
        return self.status == "shutting_down"

    async def start(self) -> None:
        try:
            t0 = time.perf_counter()
            log.info("loading model...")
            self.engine = await asyncio.to_thread(self.load_engine)
            log.info("loaded %s in %.1fs; warming up...", self.engine.info["model"], time.perf_counter() - t0)
            self.status = "warming_up"
            t0 = time.perf_counter()
            async for _ in self.engine.submit(self._warmup_request()):
                pass
            if self.load_aligner is not None:
                aligner = await asyncio.to_thread(self.load_aligner, self.engine)
                await asyncio.to_thread(aligner.align_units, [(np.zeros(24000, np.float32), ["warming", "up"])], 24000)
                self.aligner = AlignmentService(aligner, turns=self.engine.turns).start()
                log.info("forced aligner %s ready", getattr(aligner, "name", type(aligner).__name__))
            log.info("warm-up done in %.1fs; ready", time.perf_counter() - t0)
            self.status = "ready"
        except Exception:
            self.status = "failed"
            log.exception("engine start failed")

    def _warmup_request(self) -> SynthesisRequest:
        request = SynthesisRequest(text="Warming up.", max_frames=4, sampling=SamplingParams(seed=0))
        if self.engine.info["model_type"] == "base":
            tone = 0.1 * np.sin(np.arange(24000) * 2 * np.pi * 220 / 24000).astype(np.float32)
            request.ref = VoiceRef(tone, 24000, x_vector_only=True)
        return request

    def voices(self) -> list[str]:
        return list(self.engine.info["speakers"]) + self.engine.voices.names()

    def authorized(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        if not self.config.api_keys:
            return True
        auth = headers.get("authorization", "")
        key = auth[7:] if auth[:7].lower() == "bearer " else query.get("api_key", "")
        return any(hmac.compare_digest(key.encode(), k.encode()) for k in self.config.api_keys)

    async def drain(self) -> None:
        """Graceful shutdown: new work is refused; closed text gets up to shutdown_grace s to be spoken; then every
        socket's remaining contexts end with `shutting_down` and the socket closes with 1001."""
        if self.status == "failed":
            return
        self.status = "shutting_down"
        deadline = time.monotonic() + self.config.shutdown_grace
        while time.monotonic() < deadline and any(c.owes_audio for s in self.sessions for c in s.contexts.values()):
            await asyncio.sleep(0.05)
        await asyncio.gather(*[session.shutdown("server shutting down") for session in list(self.sessions)])

    def close(self) -> None:
        if self.aligner is not None:
            self.aligner.close()
        if self.engine is not None:
            self.engine.shutdown()
