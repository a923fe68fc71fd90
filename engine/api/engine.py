"""The engine: one thread owns the model and runs every step; callers use an inbox and request handles."""
import gc
import itertools
import logging
import secrets

import torch

from engine.api.commands import AppendText, Batch, CancelRequest, CloseText
from engine.api.handle import RequestHandle
from engine.api.request import SynthesisRequest, VoiceRef
from engine.api.validate import Validator
from engine.core.admission import Admission
from engine.core.background import Background
from engine.core.clock import REAL_CLOCK, Clock
from engine.core.engine_thread import EngineThread
from engine.core.host_heap import keep_heap
from engine.core.memory import kv_blocks_for_memory
from engine.core.runner import ModelRunner
from engine.core.side_work import SideWork
from engine.core.scheduler import Scheduler
from engine.core.sequence import Sequence
from engine.core.startup import phase, report
from engine.core.step import Step
from engine.core.step_cost import StepCost
from engine.kernels.registry import KernelSettings, select
from engine.models import load_model
from engine.models.base import Model

log = logging.getLogger("qwen_tts_engine")


class Engine:
    def __init__(self, model: Model, max_active: int = 64, kv_tokens_per_stream: int | None = None,
                 gpu_memory_utilization: float = 0.9, max_step_ms: float | None = None, block_size: int | None = None,
                 max_prefill_tokens: int = 8192, max_text_chars: int = 5000, use_graphs: bool | None = None,
                 kernels: KernelSettings = KernelSettings(), voices_dir: str | None = None, max_voices: int = 64,
                 clock: Clock = REAL_CLOCK, max_queue_ms: float = 0.0):
        """`max_queue_ms`: a request that cannot join at once waits for room this long at most, in order, when the
        engine expects room by then (0: `busy` at once). kv_tokens_per_stream None: the cache takes what
        `gpu_memory_utilization` leaves of the GPU (on a CPU: of the RAM available, at most CPU_TOKENS_PER_STREAM a
        stream). `max_voices`: the clone voices kept, in memory and in `voices_dir` alike (beyond: the least recently
        used is dropped)."""
        self.model = model
        cuda = model.device.type == "cuda"
        block_size = block_size or (64 if cuda else 16)
        chosen = select(model.device, kernels)
        if chosen.fp8_weights is not None:
            chosen.fp8_weights.adopt(model.projection_weights)
        log.info("kernels: %s", chosen.describe())
        by_memory = kv_tokens_per_stream is None
        kv_blocks = None if by_memory else max_active * kv_tokens_per_stream // block_size
        self.runner = ModelRunner(model, max_active, kv_blocks, block_size, use_graphs, chosen.side_decode,
                                  chosen.kv_dtype)
        if by_memory:
            graphs = 0
            if cuda:
                with phase("compile and graph sizing"):    # each stage's first call compiles its layer math
                    graphs = self.runner.graph_bytes()
            with phase("KV allocation"):
                self.runner.allocate_kv(kv_blocks_for_memory(self.runner, gpu_memory_utilization, max_active, graphs))
        self.runner.limit_batch(self.runner.kv.num_blocks - 1)     # each admitted stream holds a block at least
        if self.runner.predict_stage.use_graphs:
            reserved = torch.cuda.memory_reserved()
            seconds, counts = self.runner.capture_all()
            for name in seconds:
                report(f"graphs {name}", seconds[name], f"{counts[name]} graphs")
            log.info("graphs captured: %.1f GiB", (torch.cuda.memory_reserved() - reserved) / (1 << 30))
        gc.collect()
        gc.freeze()      # no long GC pauses mid-stream
        keep_heap()
        kv = self.runner.kv
        kv_tokens = (kv.num_blocks - 1) * block_size
        cost = StepCost()
        admission = Admission(max_active, kv_tokens, block_size, model.prompt_tokens, max_step_ms, cost)
        self.scheduler = Scheduler(model, max_active, max_prefill_tokens, kv, admission,
                                   self.runner.max_blocks * block_size, max_queue_ms / 1000)
        self.voices = model.voices(voices_dir, max_voices)
        self.background = Background(model.device, busy=lambda: self.scheduler.num_active > 0)
        self.background.pace(model.voice_modules)
        self.validator = Validator(model.cfg, self.voices, max_text_chars, model.check_request)
        self.clock = clock
        self.step = Step(model, self.runner, self.scheduler, clock, cost)
        self.side_work = SideWork(frame_s=model.audio.frame_s if model.device.type == "cuda" else None)
        self.thread = EngineThread(model, self.scheduler, self.runner, self.step, self.voices, self.side_work, clock)
        self.inbox = self.thread.inbox
        self._ids = itertools.count(1)

    @classmethod
    def load(cls, model: str | None = None, dummy: str | None = None, device=None, dtype=None, seed: int = 0,
             **kwargs) -> "Engine":
        return cls(load_model(model=model, dummy=dummy, device=device, dtype=dtype, seed=seed), **kwargs)

    @property
    def info(self) -> dict:
        return self.model.info

    @property
    def num_active(self) -> int:
        return self.scheduler.num_active

    @property
    def step_ms(self) -> float:
        return self.step.step_ms

    def is_alive(self) -> bool:
        """False once the engine thread has stopped: no request would ever end."""
        return self.thread.is_alive()

    def stats(self) -> dict:
        sched, queue = self.scheduler, self.scheduler.queue
        return dict(active=self.num_active, running=len(sched.running), waiting=len(sched.waiting),
                    queued=len(queue), queue_oldest_ms=1000 * queue.oldest_wait_s(self.clock.monotonic()),
                    queued_total=queue.queued, queue_expired=queue.expired, queue_waited_s=queue.waited_s,
                    queue_max_waited_ms=1000 * queue.max_waited_s,
                    frames=self.step.frames_total, errors=self.thread.errors, step_ms=self.step_ms,
                    listener_dry=self.step.audio.dry, first_chunks=self.step.audio.first_chunks,
                    to_slot_s=self.step.audio.to_slot_s, to_first_chunk_s=self.step.audio.to_first_chunk_s,
                    gpu_ms=dict(self.runner.timeline.ms),
                    turns_given=self.side_work.stats["given"], turns_withdrawn=self.side_work.stats["withdrawn"],
                    step_capacity=min(sched.max_active, sched.admission.streams_within_bound()),
                    max_active=sched.max_active, refused=sched.admission.refused, kv_tokens=sched.admission.kv_tokens,
                    kv_reserved=sched.admission.reserved,
                    kv_used=(sched.kv.num_blocks - 1 - len(sched.kv.free_blocks)) * sched.kv.block_size)

    def submit(self, request: SynthesisRequest) -> RequestHandle:
        request = self.validator.prepare(request)
        seq_id = next(self._ids)
        handle = RequestHandle(seq_id, abandon=lambda: self.cancel(seq_id))
        self.inbox.put(self.sequence(seq_id, request, handle))
        return handle

    def sequence(self, seq_id: int, request: SynthesisRequest, handle) -> Sequence:
        """A request checked by the caller (the engine core's front end), `handle.deliver` called on this engine's
        thread: for `apply`."""
        seed = request.sampling.seed if request.sampling.seed is not None else secrets.randbits(31)
        return Sequence(seq_id, request, handle, seed, self.model.text_prefix, self.model.audio)

    def on_delivered(self, callback) -> None:
        """`callback()` on the engine thread once each of its loops has delivered to the handles (a step's chunks,
        errors), and before an aligner's turn: a caller that ships deliveries in batches ships them then."""
        self.thread.delivered = callback

    def apply(self, commands: list) -> None:
        """Sequences to add and AppendText/CloseText/CancelRequest, in order, taken by the engine thread at once."""
        self.inbox.put(Batch(commands))

    def append_text(self, seq_id: int, text: str) -> None:
        self.validator.check_append(text)
        self.inbox.put(AppendText(seq_id, text))

    def close_text(self, seq_id: int) -> None:
        self.inbox.put(CloseText(seq_id))

    def cancel(self, seq_id: int) -> None:
        self.inbox.put(CancelRequest(seq_id))

    def register_voice(self, name: str, ref: VoiceRef):
        """Computes the clone conditioning beside the engine thread, one at a time; returns a concurrent Future.
        Raises EngineInputError at once for a bad name or reference, or `busy` while too many wait."""
        return self.voices.register(name, ref, self.background)

    def delete_voice(self, name: str) -> bool:
        return self.voices.delete(name)

    def voice_names(self) -> list[str]:
        return self.voices.names()

    def description(self) -> dict:
        """What a client in another process needs to check requests and read stored voices: plain data, no torch."""
        store = self.voices.store
        return dict(info=self.info, rules=self.model.request_rules, check=self.model.check_request,
                    max_text_chars=self.validator.max_text_chars,
                    voices_dir=str(store.path) if store is not None else None)

    def start(self) -> "Engine":
        self.background.start()
        self.thread.start()
        return self

    def shutdown(self) -> None:
        self.background.stop()
        self.thread.stop()
