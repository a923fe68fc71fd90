"""The engine: one thread owns the model and runs every step for all active streams.

Callers (the async gateway, the CLI) talk to it only through an inbox of commands and per-request
handles that receive AudioChunks; they never touch tensors."""
import gc
import itertools
import logging
import queue
import secrets
import sys
import threading
import traceback

import torch

from engine.core.admission import Admission
from engine.core.clock import REAL_CLOCK, Clock
from engine.kernels.registry import KernelSettings, select
from engine.api.handle import RequestHandle
from engine.core.isolation import FaultIsolation
from engine.core.memory import kv_blocks_for_memory
from engine.models.qwen3_tts.model import LoadedModel, load_model
from engine.api.request import EngineInputError, SynthesisRequest, VoiceRef
from engine.core.runner import ModelRunner
from engine.core.scheduler import Scheduler
from engine.core.sequence import Sequence, Status
from engine.core.step import StepLoop
from engine.core.device_turns import TurnGate
from engine.api.validate import Validator
from engine.models.qwen3_tts.voice_store import VoiceStore
from engine.models.qwen3_tts.voices import VoiceCache

log = logging.getLogger("qwen_tts_engine")


class Engine:
    def __init__(self, model: LoadedModel, max_seqs: int = 64, kv_tokens_per_seq: int | None = None,
                 gpu_memory_utilization: float = 0.9, max_step_ms: float | None = None, block_size: int | None = None,
                 max_prefill_tokens: int = 8192, max_text_chars: int = 5000, use_graphs: bool | None = None,
                 kernels: KernelSettings = KernelSettings(), voices_dir: str | None = None, clock: Clock = REAL_CLOCK):
        """kv_tokens_per_seq None: on CUDA the KV cache takes what `gpu_memory_utilization` of the card leaves
        (engine/memory.py), on the CPU 2,048 tokens a stream. max_step_ms: no stream joins while a step is slower.
        voices_dir: registered voices are stored there (in a folder per model), else only kept in memory. clock:
        the listeners' (engine/core/clock.py)."""
        self.model = model
        cuda = model.device.type == "cuda"
        block_size = block_size or (64 if cuda else 16)
        if cuda:
            torch.backends.cudnn.benchmark = True       # fixed shapes per graph bucket: pick the fastest convs
        chosen = select(model.device, kernels)
        log.info("kernels: %s", chosen.describe())
        by_memory = kv_tokens_per_seq is None and cuda
        kv_blocks = None if by_memory else max_seqs * (kv_tokens_per_seq or 2048) // block_size
        self.runner = ModelRunner(model, max_seqs, kv_blocks, block_size, use_graphs, chosen.side_decode)
        if by_memory:
            self.runner.allocate_kv(kv_blocks_for_memory(self.runner, gpu_memory_utilization))
        if self.runner.predict_stage.use_graphs:
            reserved = torch.cuda.memory_reserved()
            self.runner.capture_all()
            log.info("graphs captured: %.1f GiB", (torch.cuda.memory_reserved() - reserved) / (1 << 30))
        gc.collect()
        gc.freeze()      # the model, graphs and compile caches leave the collector's scans: no long pauses mid-stream
        kv = self.runner.kv
        admission = Admission(max_seqs, (kv.num_blocks - 1) * block_size, block_size, max_step_ms)
        self.scheduler = Scheduler(max_seqs, max_prefill_tokens, kv, admission)
        self.voices = VoiceCache(model, store=VoiceStore.for_model(voices_dir, model.name) if voices_dir else None)
        self.validator = Validator(model.cfg, self.voices, max_text_chars)
        self.clock = clock
        self.loop = StepLoop(model, self.runner, self.scheduler, clock)
        self.isolation = FaultIsolation(self.scheduler)
        self.turns = TurnGate()                  # device time for the aligner, between steps
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.seqs: dict[int, Sequence] = {}
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._stop = False
        self.errors = 0

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
        """Moving average of a step's wall time: every running stream gains one 80 ms frame per step."""
        return self.loop.step_s * 1000

    def stats(self) -> dict:
        sched = self.scheduler
        return dict(active=self.num_active, running=len(sched.running), waiting=len(sched.waiting),
                    frames=self.loop.frames_total, errors=self.errors, step_ms=self.step_ms,
                    max_active=sched.max_seqs, refused=sched.admission.refused, kv_tokens=sched.admission.kv_tokens,
                    kv_reserved=sched.admission.reserved,
                    kv_used=(sched.kv.num_blocks - 1 - len(sched.kv.free_blocks)) * sched.kv.block_size)

    # caller side (any thread) -------------------------------------------------------------------------------
    def submit(self, request: SynthesisRequest, sink=None) -> RequestHandle:
        """`sink(handle, item)` takes the request's chunks and its error (on the engine thread) instead of the
        handle's queue. A request beyond the engine's capacity gets EngineInputError `busy` from its handle."""
        request = self.validator.prepare(request)
        seq_id = next(self._ids)                 # atomic: submit may come from several threads
        seed = request.sampling.seed if request.sampling.seed is not None else secrets.randbits(31)
        handle = RequestHandle(self, seq_id, sink)
        self.inbox.put(("add", Sequence(seq_id, request, handle, seed)))
        return handle

    def append_text(self, seq_id: int, text: str) -> None:
        self.inbox.put(("append", seq_id, text))

    def close_text(self, seq_id: int) -> None:
        self.inbox.put(("close", seq_id))

    def cancel(self, seq_id: int) -> None:
        self.inbox.put(("cancel", seq_id))

    def register_voice(self, name: str, ref: VoiceRef):
        """Computes the clone conditioning once on the engine thread; returns a concurrent Future."""
        return self.voices.register(name, ref, self.inbox)

    def delete_voice(self, name: str) -> bool:
        return self.voices.delete(name)

    def start(self) -> "Engine":
        # The step thread waits on the GPU a few times per step and must get the interpreter back at once: with the
        # default 5 ms switch interval, a busy event loop or aligner thread held it that long after every wait.
        sys.setswitchinterval(min(sys.getswitchinterval(), 0.0005))
        self._thread = threading.Thread(target=self._run, name="tts-engine", daemon=True)
        self._thread.start()
        return self

    def shutdown(self) -> None:
        self._stop = True
        self.inbox.put(("wake",))
        if self._thread:
            self._thread.join(timeout=10)

    # engine thread --------------------------------------------------------------------------------------------
    def _run(self) -> None:
        if self.model.device.type == "cuda":
            # The highest priority: work beside the engine (the aligner) gets only the SMs its steps leave idle.
            torch.cuda.synchronize(self.model.device)
            torch.cuda.set_stream(torch.cuda.Stream(self.model.device, priority=-100))
        while not self._stop:
            busy = self.scheduler.has_work() or self.loop.audio.in_flight
            if not busy:
                self.turns.idle()
            self._drain(0.0 if busy else 0.005 if self.scheduler.holds_audio() else 0.5)
            if self._stop:
                break
            self._follow(self.turns.close())
            try:
                self.isolation.run(self.loop.step)
            except Exception as exc:          # a failed step ends the stream(s) that made it fail, never the engine
                self.errors += 1
                traceback.print_exc()
                self.loop.drop_in_flight()
                for seq, error in self.isolation.failed(exc):
                    self._fail(seq, error)
            else:
                self._give_turn()
        self.turns.idle()
        for seq in list(self.scheduler.running) + list(self.scheduler.waiting):
            self._fail(seq, RuntimeError("engine shut down"))

    def _give_turn(self) -> None:
        """A turn to the waiting side work (engine/turns.py) if every listener has 1.5x what it asks for and a few
        steps of audio ahead (its budget: what they can spare); what they need meanwhile goes out first."""
        cost = self.turns.wanted
        if cost is None:
            return
        reserve = max(0.1, 3 * self.loop.step_s)           # the next step and its audio's read
        slack = self.scheduler.slack_s(self.clock.monotonic())
        budget = (slack - reserve) / 1.5
        if budget < cost:
            return
        self.loop.audio.send(slack)
        self.runner.join_decode()                          # the turn follows all of the step, its decode too
        cuda = self.model.device.type == "cuda"
        # The listeners can spare the rest for the turn's host work (queueing its kernels): no more is waited for.
        self._follow(self.turns.give(torch.cuda.current_stream().record_event() if cuda else None,
                                     max(0.01, budget / 2), budget))

    @staticmethod
    def _follow(done) -> None:
        if done is not None:
            torch.cuda.current_stream().wait_event(done)

    def _drain(self, wait_s: float) -> None:
        """Apply every queued command, waiting up to `wait_s` for the first one."""
        try:
            cmd = self.inbox.get(timeout=wait_s) if wait_s else self.inbox.get_nowait()
            while True:
                try:
                    self._apply(cmd)
                except Exception:             # a bad command must never stop the engine thread
                    self.errors += 1
                    traceback.print_exc()
                cmd = self.inbox.get_nowait()
        except queue.Empty:
            pass
        self.loop.settle_text()               # the text appended meanwhile, tokenized once per stream
        for seq_id in [i for i, s in self.seqs.items() if s.status is Status.FINISHED]:
            del self.seqs[seq_id]

    def _apply(self, cmd) -> None:
        kind, *args = cmd
        if kind == "add":
            seq = args[0]
            try:
                self.loop.admit_request(seq, self.voices)
                self.scheduler.add(seq, self.step_ms)
                self.seqs[seq.id] = seq
            except EngineInputError as exc:
                seq.handle.deliver(exc)
            except Exception as exc:            # e.g. reference audio the encoders cannot take
                seq.handle.deliver(EngineInputError("invalid_request", f"request could not be prepared: {exc}"))
        elif kind == "voice":
            self.voices.compute(*args)
        elif kind in ("append", "close", "cancel"):
            seq = self.seqs.get(args[0])
            if seq is None or seq.status is Status.FINISHED or kind == "append" and seq.closed:
                return                          # text after close_text would be spoken after end-of-text
            if kind == "cancel":
                self.loop.end(seq, "cancelled")
            else:
                self.loop.update_text(seq, args[1] if kind == "append" else "", closed=kind == "close")

    def _fail(self, seq: Sequence, exc: Exception) -> None:
        self.scheduler.finish(seq, "error")
        seq.handle.deliver(exc)
