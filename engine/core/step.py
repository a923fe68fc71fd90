"""One engine step for all active streams: the scheduler's plan through the model's stages (prefill -> talk -> predict
-> decode), its results applied by the scheduler, the frames read into the playout."""
import time

from engine.core.output import AudioOut
from engine.core.plan import Plan
from engine.core.sequence import Sequence, Status
from engine.core.step_cost import StepCost
from engine.core.text_intake import TextIntake
from engine.core.transfer import HostCopy


class Step:
    def __init__(self, model, runner, scheduler, clock, cost: StepCost):
        self.model, self.runner, self.scheduler, self.clock, self.cost = model, runner, scheduler, clock, cost
        self.intake = TextIntake(model.tokenizer, model.text_prefix)
        self.plan = Plan(prefilled=True)
        self.frames_total = 0
        self.talked: tuple[list[Sequence], HostCopy | None] = ([], None)
        self.unsettled: tuple[Plan, HostCopy | None] | None = None     # a step whose talk's results are not read
        self.audio = AudioOut(scheduler, model.audio, clock)
        self.ended = 0.0
        self.waited = 0.0                  # read_talk's wait for the device since the last step's cost
        self.steps = 0
        self.before_decode = lambda: False  # side work's turn between the step's own work and its decode: given?

    @property
    def step_s(self) -> float:
        return self.cost.s

    @property
    def step_ms(self) -> float:
        return self.cost.ms

    def admit_request(self, seq: Sequence, voices) -> None:
        self.model.prepare(seq, voices)
        self.intake.add(seq)

    def update_text(self, seq: Sequence, text: str, closed: bool) -> None:
        self.intake.add(seq, text, closed)

    def settle_text(self) -> None:
        for seq, error in self.intake.settle(self.scheduler.queue.holds):
            self.scheduler.finish(seq, "error", error)

    def run(self) -> None:
        """schedule_talk, schedule -> prefill, talk, predict, (a side turn), decode -> playout; the talk's results
        are read when the next step starts (at once while a small batch reads its audio now)."""
        runner, sched = self.runner, self.scheduler
        self.read_talk()
        self.steps += 1
        started = time.perf_counter()
        waited, self.waited = self.waited, 0.0        # the talk's wait at the loop's top is this step's own
        plan = self.plan = Plan()          # kept before it fills: a failed step's admitted streams wait again
        sched.schedule_talk(plan)
        sched.schedule(plan, self.clock.monotonic())
        if plan.admitted:
            taken = self.clock.monotonic()
            for seq in plan.admitted:
                seq.started_at = taken
            runner.start(plan.admitted)
            self.audio.start(plan.admitted)
            runner.prefill(plan.admitted, plan.prompts)
        if plan.talk.seqs:
            self.talked = (plan.talk.seqs, HostCopy(runner.talk(plan.talk)))
        plan.talk.undo.clear()
        plan.prefilled = True
        frames = codes = None
        if plan.ready:
            codes = runner.predict(plan.ready)
        turned = self.before_decode()
        if plan.ready:
            frames = runner.decode(plan.ready, codes)
        self.unsettled = (plan, frames)
        ids = self.talked[1]
        if len(plan.ready) < self.audio.read_later_from or ids is None or ids.ready():
            self.read_talk()
        now = time.perf_counter()
        self.waited = 0.0                               # a wait just now is inside the step
        gap = started - self.ended - waited
        self.cost.observe(now - started + waited + (gap if gap < 0.1 else 0.0), len(sched.running), len(plan.admitted))
        self.ended = now
        self.audio.flush(self.step_s, len(plan.admitted), behind_turn=frames if turned else None)
        runner.timeline.end_step()

    def flush_before_turn(self) -> None:
        """The frames read so far to their listeners, within the step: a side turn's budget counts them."""
        self.audio.flush(self.step_s, len(self.plan.admitted), final=False)

    def read_talk(self) -> None:
        """The last talk's first codes (EOS, faults) and which of the last step's frames count, into the playout."""
        if self.unsettled is None:
            return
        (plan, frames), (talked, ids) = self.unsettled, self.talked
        self.unsettled, self.talked = None, ([], None)
        waited = time.perf_counter()
        first = ids.wait()[0].tolist() if ids is not None else []
        self.waited += time.perf_counter() - waited
        kept = self.scheduler.update(plan, talked, first)
        self.frames_total += sum(kept)
        if frames is not None:
            self.audio.add(plan.ready, kept, frames)

    def drop_in_flight(self) -> None:
        """After a failed step: its streams admitted and not prefilled wait again, its talkers whose talk never ran
        give back what they took; a talk that ran still ends the streams it drew EOS or a fault for."""
        if not self.plan.prefilled:
            self.scheduler.untalk(self.plan.talk)
            for s in self.plan.admitted:
                if s.status is Status.RUNNING:
                    self.scheduler.requeue(s)
        talked, ids = self.talked
        if ids is not None:
            try:
                self.scheduler.apply_talk(talked, ids.wait()[0].tolist())
            except Exception:       # noqa: BLE001 - the device's own fault: a server fault ends every stream
                pass
        self.talked, self.unsettled = ([], None), None
        self.audio.drop()
        self.runner.timeline.drop_step()
