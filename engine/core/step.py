"""One engine step for all active streams, through the model's stages: prefill -> predict -> decode -> talk."""
import itertools
import time
from collections import defaultdict
from contextlib import contextmanager

import numpy as np
import torch

from engine.api.request import AudioChunk, EngineInputError
from engine.core.output import AudioOut
from engine.core.sequence import Sequence, Status
from engine.core.text_intake import TextIntake
from engine.core.transfer import HostCopy
from engine.models.sampling import FAULT


class KVCacheFull(RuntimeError):
    """A stream needed a KV block when none was free: it ends; the others go on."""


class Step:
    def __init__(self, model, runner, scheduler, clock):
        self.model, self.runner, self.scheduler, self.clock = model, runner, scheduler, clock
        self.intake = TextIntake(model.tokenizer, model.text_prefix)
        self.max_context = runner.max_blocks * runner.kv.block_size
        self.max_prompt = min(runner.max_blocks, runner.kv.num_blocks - 1) * runner.kv.block_size - 1
        self.frames_total = 0
        self.talked: tuple[list[Sequence], HostCopy | None] = ([], None)
        self.audio = AudioOut(scheduler, model.audio, clock)
        self.step_s = 0.0                      # includes the host work between steps
        self.ended = 0.0
        self.profile = False
        self.reset_profile()

    @property
    def step_ms(self) -> float:
        return self.step_s * 1000

    def reset_profile(self) -> None:
        self.stage_s: dict[str, float] = defaultdict(float)
        self.steps = 0

    def profile_summary(self) -> dict:
        return dict(steps=self.steps, **{k: round(v * 1000 / max(self.steps, 1), 3) for k, v in self.stage_s.items()})

    @contextmanager
    def _stage(self, name: str):
        if not self.profile:
            yield
            return
        if self.model.device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        yield
        if self.model.device.type == "cuda":
            torch.cuda.synchronize()
        self.stage_s[name] += time.perf_counter() - t0

    def admit_request(self, seq: Sequence, voices) -> None:
        self.model.prepare(seq, voices)
        self.intake.add(seq)

    def update_text(self, seq: Sequence, text: str, closed: bool) -> None:
        self.intake.add(seq, text, closed)

    def settle_text(self) -> None:
        for seq, error in self.intake.settle():
            self.end(seq, "error", error)

    def end(self, seq: Sequence, reason: str, error: Exception | None = None) -> None:
        self.scheduler.finish(seq, reason)
        audio = self.model.audio
        seq.handle.deliver(error or AudioChunk(np.zeros(0, np.float32), np.zeros((0, audio.num_codebooks), np.int64),
                                               seq.frames, seq.frames * audio.samples_per_frame, True, reason))

    def _prompt(self, s: Sequence):
        """A prompt that can never fit ends its stream."""
        prompt = self.model.prompt(s)
        if prompt is not None and prompt.length > self.max_prompt:
            self.end(s, "error", EngineInputError("text_too_long", f"the prompt ({prompt.length} tokens) "
                                                  f"exceeds the {self.max_prompt} tokens a stream can start with"))
            return None
        return prompt

    def run(self) -> None:
        runner, sched = self.runner, self.scheduler
        self.steps += 1
        started = time.perf_counter()
        with self._stage("prefill"):
            seqs, prompts = sched.admit(self._prompt, self.clock.monotonic())
            for s, p in zip(seqs, prompts):
                s.fed, s.eos_fed = p.consumed, p.eos_consumed
            if seqs:
                runner.start(seqs)
                runner.prefill(seqs, prompts)
        ready = [s for s in sched.running if s.frame_started]
        frames = None
        if ready:
            with self._stage("predict"):
                codes = runner.predict(ready)
            with self._stage("decode"):
                frames = runner.decode(ready, codes)
        self._take_eos()
        kept = [s.finish_reason is None for s in ready]              # an EOS stream's frame was not a frame
        for s in itertools.compress(ready, kept):
            s.frames += 1
            self.frames_total += 1
            if s.frames >= s.max_frames:
                s.finish_reason = "max_frames" if s.request.max_frames is not None else "length"
        talking, text_ids, stalled = [], [], []
        for s in list(sched.running):
            if s.frame_started or s.finish_reason:
                continue
            if s.num_tokens + 1 > self.max_context:
                s.finish_reason = "length"
                continue
            if not runner.kv.can_grow(s, 1):
                stalled.append(s)
                continue
            tid = s.next_text_id(self.model.text_pad, self.model.text_eos)
            if tid is not None:
                runner.kv.grow(s, 1)
                talking.append(s)
                text_ids.append(tid)
        if stalled and not talking and not ready:  # no stream can free a block: the youngest gives its own
            self.end(stalled[-1], "error", KVCacheFull(f"the KV cache is full ({stalled[-1].num_tokens} tokens in "
                                                       "this stream); retry"))
        if talking:
            with self._stage("talk"):
                self.talked = (talking, HostCopy(runner.talk(talking, text_ids)))
        with self._stage("host"):
            if frames is not None:
                self.audio.add(ready, kept, frames)
            now = time.perf_counter()
            between = started - self.ended if started - self.ended < 0.1 else 0.0
            self.step_s, self.ended = 0.9 * self.step_s + 0.1 * (now - started + between), now
            # a first chunk must outlast the wait for the next: a step, one more when read late, and the jitter
            first = 2 if len(seqs) > 1 or sched.admitting() or 3 * self.step_s > self.model.audio.frame_s else 1
            self.audio.flush(max(0.3, 4 * self.step_s), first)

    def drop_in_flight(self) -> None:
        self.talked = ([], None)
        self.audio.drop()

    def _take_eos(self) -> None:
        talking, ids = self.talked
        self.talked = ([], None)
        if ids is None:
            return
        for s, c in zip(talking, ids.wait()[0].tolist()):
            if s.status is not Status.RUNNING:
                continue
            if c == self.model.eos:
                s.frame_started = False
                s.finish_reason = "eos"
            elif c == FAULT:
                self.end(s, "error", EngineInputError("generation_failed", "the model's output for this request "
                                                      "went non-finite (NaN/Inf); it was ended, other streams go on"))
