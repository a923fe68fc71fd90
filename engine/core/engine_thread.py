"""The engine thread: drains the inbox, runs each step, gives side work a turn within it, before its decode."""
import queue
import sys
import threading
import traceback

import torch

from engine.api.commands import AppendText, Batch, CancelRequest, CloseText
from engine.api.request import EngineInputError
from engine.core.isolation import FaultIsolation
from engine.core.sequence import Sequence, Status
from engine.core.side_work import SideWork

STARTING_TURN_S = 0.02      # the least a turn may delay a starting stream's first audio


class EngineThread:
    def __init__(self, model, scheduler, runner, step, voices, side_work, clock):
        self.model, self.scheduler, self.runner, self.step = model, scheduler, runner, step
        self.voices, self.side_work, self.clock = voices, side_work, clock
        self.isolation = FaultIsolation(scheduler)
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.seqs: dict[int, Sequence] = {}
        self.errors = 0
        self._stop = False
        self._thread: threading.Thread | None = None
        self.delivered = lambda: None       # called once a loop's deliveries to handles are made: whoever ships them
        self.handlers = {Sequence: self._add, AppendText: self._append, CloseText: self._close,
                         CancelRequest: self._cancel, Batch: self._batch}
        step.before_decode = self._turn

    def start(self) -> None:
        sys.setswitchinterval(min(sys.getswitchinterval(), 0.0005))    # the GIL back at once after each GPU wait
        self._thread = threading.Thread(target=self._run, name="tts-engine", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop = True
        self.inbox.put(Batch([]))
        if self._thread:
            self._thread.join(timeout=10)

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        if self.model.device.type == "cuda":
            # highest priority: work beside the engine gets only the SMs its steps leave idle
            torch.cuda.synchronize(self.model.device)
            torch.cuda.set_stream(torch.cuda.Stream(self.model.device, priority=-100))
        while not self._stop:
            busy = self.scheduler.has_work() or self.step.audio.in_flight
            if not busy:
                self.side_work.idle()
            try:                # the last talk read before the inbox: what came while it ran joins this step
                self.step.read_talk()
            except Exception as exc:
                self._step_failed(exc)
            self.drain(0.0 if busy else 0.005 if self.scheduler.holds_audio() or self.scheduler.queue else 0.5)
            self.delivered()
            if self._stop:
                break
            self._follow(self.side_work.close())
            try:
                self.isolation.run(self.step.run)
            except Exception as exc:
                self._step_failed(exc)
            else:
                self.delivered()
        self.side_work.idle()
        for seq in list(self.scheduler.running) + list(self.scheduler.waiting) + self.scheduler.queue.seqs():
            self._fail(seq, RuntimeError("engine shut down"))
        self.delivered()

    def _step_failed(self, exc: Exception) -> None:
        """A failed step ends only the stream(s) that made it fail."""
        self.errors += 1
        traceback.print_exc()
        self.step.drop_in_flight()
        for seq, error in self.isolation.failed(exc):
            self._fail(seq, error)
        self.delivered()

    def _turn(self) -> bool:
        """Within a step, before its decode: a turn then runs alone and the main stream never waits for a decode.
        -> whether the step's decode follows a turn on the device."""
        if not self.side_work.attached or self.isolation.probing is not None:    # a probe steps a part of the streams
            return False
        self.step.flush_before_turn()                # the listeners' slack counts the frames read since the last step
        done = self._offer_turn()
        queuing = self.side_work.close()             # a turn given, still queuing past its spare time: the step waits
        self._follow(queuing)
        return (done or queuing) is not None

    def _offer_turn(self):
        """-> what the step's next work must follow (None: no turn, or no device events)."""
        # streams not yet heard do not bound the turn (their first chunk waits for the next step) but their first
        # audio pays for it: then a turn is short, so that words keep up while streams start all the time
        slack, step_s = self.scheduler.slack_s(self.clock.monotonic(), listening=True), self.step.step_s
        most = max(STARTING_TURN_S, step_s / 2) if self.scheduler.starting() else float("inf")
        line_ms, plan = self.scheduler.admission.max_step_ms, self.side_work.plan
        if line_ms is not None and plan is not None:      # half the room admission leaves; the rest, streams joining
            most = min(most, (line_ms / 1000 - plan.alone(step_s)) / 2)
        budget = SideWork.budget(slack, self.side_work.reserve(step_s), most)
        self.side_work.planned(step_s, budget)       # the turns words are admitted on
        if self.side_work.wanted is None:
            return None
        done = self.side_work.offer(budget, lambda: self._before_turn(slack))
        self._follow(done)
        return done

    def _before_turn(self, slack: float):
        """The turn follows the step's own work and the last step's decode; this step's decode follows the turn."""
        self.step.audio.send(slack, heard_only=True)
        self.delivered()                            # those chunks go out before the turn, not after it
        self.runner.join_decode()
        if self.model.device.type != "cuda":
            return None
        after = torch.cuda.Event(enable_timing=True)      # timed: side work queued beside the step is timed past it
        after.record()
        return after

    @staticmethod
    def _follow(done) -> None:
        if done is not None:
            torch.cuda.current_stream().wait_event(done)

    def drain(self, wait_s: float = 0.0) -> None:
        """Applies what the inbox holds (waiting up to `wait_s` for the first), admits, settles text: the loop's own
        step before each model step, and the seam that drives an engine not started."""
        try:
            cmd = self.inbox.get(timeout=wait_s) if wait_s else self.inbox.get_nowait()
            while True:
                self._apply(cmd)
                cmd = self.inbox.get_nowait()
        except queue.Empty:
            pass
        for seq, error in self.scheduler.admit_queued(self.step.step_ms, self.clock.monotonic(), wait_s > 0):
            self._fail(seq, error)
        self.step.settle_text()                 # after admitting: the queue's streams just joined settle now
        for seq_id in [i for i, s in self.seqs.items() if s.status is Status.FINISHED]:
            del self.seqs[seq_id]

    def _apply(self, cmd) -> None:
        try:
            self.handlers[type(cmd)](cmd)
        except Exception:                       # an unknown or malformed command: logged, the engine goes on
            self.errors += 1
            traceback.print_exc()

    def _batch(self, batch: Batch) -> None:
        for cmd in batch.commands:
            self._apply(cmd)

    def _add(self, seq: Sequence) -> None:
        try:
            if seq.id in self.seqs:
                raise EngineInputError("invalid_request", f"request id {seq.id} is in use")
            self.step.admit_request(seq, self.voices)
            self.scheduler.add(seq, self.step.step_ms, self.clock.monotonic())
            self.seqs[seq.id] = seq
        except EngineInputError as exc:
            seq.handle.deliver(exc)
        except Exception as exc:
            seq.handle.deliver(EngineInputError("invalid_request", f"request could not be prepared: {exc}"))

    def _open(self, seq_id: int) -> Sequence | None:
        """None once it ended or its text was closed: text after close_text would be spoken after end-of-text."""
        seq = self.seqs.get(seq_id)
        return None if seq is None or seq.status is Status.FINISHED or seq.text.closed else seq

    def _append(self, cmd: AppendText) -> None:
        if (seq := self._open(cmd.id)) is not None:
            self.step.update_text(seq, cmd.text, closed=False)

    def _close(self, cmd: CloseText) -> None:
        if (seq := self._open(cmd.id)) is not None:
            self.step.update_text(seq, "", closed=True)

    def _cancel(self, cmd: CancelRequest) -> None:
        seq = self.seqs.get(cmd.id)
        if seq is not None and seq.status is not Status.FINISHED:
            self.scheduler.finish(seq, "cancelled")

    def _fail(self, seq: Sequence, exc: Exception) -> None:
        self.scheduler.finish(seq, "error", exc)
