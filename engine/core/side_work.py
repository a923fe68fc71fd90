"""Work beside the engine in turns on its device between steps, within the listeners' slack; alone, since side kernels
beside a step's small dependent ones slow both. On a GPU it also learns the frame's planned share (the capacity words
are admitted on)."""
import threading
import time
from contextlib import contextmanager

from engine.core.turn_plan import TurnPlan

RESERVE_S = 0.08


class Turn:
    def __init__(self, gate: "SideWork", given: bool, after=None, budget_s: float = float("inf")):
        self.gate, self.given, self.after = gate, given, after
        self.budget_s = budget_s
        self.done = self.started = None
        self.beside = None                 # (start, end) events of its holder's work queued beside the step first
        self.ended = self.late = False
        # its holder took it; its work started queuing; the engine stopped waiting before that
        self.taken = self.begun = self.withdrawn = False

    def end(self, done=None, started=None, beside=None) -> None:
        """`beside`: events around the holder's work queued before the turn's wait for the step (on its stream)."""
        self.beside = self.beside or beside          # its gate ends it again, without events, once it is left
        self.gate._end(self, done, started)

    def timed(self) -> bool:
        """Its device time can be read without waiting (or it has none to read)."""
        return self.ended and (self.started is None or self.done is None or self.done.query())

    def seconds(self) -> float | None:
        if self.started is None or self.done is None:
            return None
        self.done.synchronize()
        return self.started.elapsed_time(self.done) / 1000

    def beside_seconds(self) -> float:
        """The device time of the holder's work queued beside the step (read after seconds()): where it outlasted the
        step, at most its span (past the step's end the device may also have waited for the host to queue it); its
        span alone waits, on a low-priority stream, for the step's kernels, whose time holds its share of the SMs.
        After no step (an idle engine's turn), its span."""
        if self.beside is None:
            return 0.0
        start, end = self.beside
        span = start.elapsed_time(end) / 1000
        return span if self.after is None else min(span, max(0.0, self.after.elapsed_time(end) / 1000))


class SideWork:
    def __init__(self, timeout_s: float = 1.0, frame_s: float | None = None):
        """`frame_s`: plan a share of each frame for side work (on a GPU, where turns are timed); None: no plan."""
        self._cv = threading.Condition()
        self.timeout_s = timeout_s
        self.plan = TurnPlan(frame_s) if frame_s else None
        self._untimed: list[Turn] = []     # turns given whose device time the plan has not counted yet
        self.wanted: float | None = None   # device seconds of the turn a caller waits for
        self._given: Turn | None = None
        self._current: Turn | None = None
        self.open = False
        self.attached = False              # someone takes turns: until then the engine plans none
        self.stats = dict(given=0, idle=0, late=0, withdrawn=0, engine_wait_s=0.0)

    def attach(self) -> None:
        self.attached = True

    @contextmanager
    def turn(self, cost_s: float, begun: bool = True):
        """`begun`: the caller queues its work at once; else it calls begin() first, and the engine waits for that
        no longer than a turn's spare time (the turn is then withdrawn)."""
        with self._cv:
            self.attached, self.wanted = True, cost_s
            while not self.open and self._given is None:
                self._cv.wait()
            turn, self._given, self.wanted = self._given or Turn(self, False), None, None
            self.stats["given" if turn.given else "idle"] += 1
            self._current, turn.taken, turn.begun = turn, True, begun
        try:
            yield turn
        finally:
            turn.end()

    def begin(self, turn: Turn) -> bool:
        """A turn taken with begun=False, its work about to queue: False if the engine withdrew it meanwhile."""
        with self._cv:
            turn.begun = not turn.withdrawn
            return turn.begun

    def _end(self, turn: Turn, done, started) -> None:
        with self._cv:
            if turn.ended:
                return
            turn.done, turn.started, turn.ended = done, started, True
            if self._current is turn:
                self._current = None
            self._cv.notify_all()

    def idle(self) -> None:
        with self._cv:
            self.open = True
            self._cv.notify_all()

    def close(self):
        """Before a step: returns what the step must follow. A turn already late holds back no further step."""
        with self._cv:
            self.open = False
            self._withdraw(self._current)
            return None if self._current is not None and (self._current.late or self._current.withdrawn) \
                else self._wait(self._current)

    def planned(self, step_s: float, most_s: float = float("inf")) -> float:
        """After each step (`step_s`: its time, turns included; `most_s`: the longest turn the listeners allow now):
        the device seconds of this frame's planned share."""
        if self.plan is None:
            return 0.0
        with self._cv:
            timed = [t for t in self._untimed if t.timed()]
            self._untimed = [t for t in self._untimed if t not in timed]
        return self.plan.after_step(step_s, sum(map(device_seconds, timed)), most_s)

    def reserve(self, step_s: float) -> float:
        """The audio a listener keeps past a turn: a timed turn (a GPU's) delays the frames in flight until the next
        step's read, so that step and the relay after it (its jitter at least RESERVE_S); an untimed one (a CPU's,
        whose work shares the engine's cores and may outlast its budget) a step more, at least 100 ms."""
        return max(RESERVE_S, 2 * step_s) if self.plan is not None else max(0.1, 3 * step_s)

    @staticmethod
    def budget(slack_s: float, reserve_s: float, most_s: float = float("inf")) -> float:
        """The longest turn the listeners allow: the slack past `reserve_s`, over 1.5, at most `most_s`."""
        return min((slack_s - reserve_s) / 1.5, most_s)

    def offer(self, budget: float, settle):
        """After a step: a turn if the listeners allow (`budget`) its cost."""
        cost = self.wanted
        if cost is None or budget < cost:
            return None
        return self.give(settle(), max(0.01, budget / 2), budget)

    def give(self, after, spare_s: float | None = None, budget_s: float = float("inf")):
        """None if the turn did not queue its work within `spare_s`."""
        with self._cv:
            if self.wanted is None or self._given is not None:
                return None
            self._given = Turn(self, True, after, budget_s)
            if self.plan is not None:
                self._untimed.append(self._given)
            self._cv.notify_all()
            return self._wait(self._given, spare_s)

    def _withdraw(self, turn: Turn | None) -> bool:
        """A turn whose work has not begun to queue is no longer waited for (its holder's host work outlasted it)."""
        if turn is None or not turn.taken or turn.begun or turn.ended or turn.withdrawn:
            return False
        turn.withdrawn = True
        self.stats["withdrawn"] += 1
        return True

    def _wait(self, turn: Turn | None, timeout_s: float | None = None):
        if turn is None:
            return None
        t0 = time.perf_counter()
        ended = self._cv.wait_for(lambda: turn.ended, min(self.timeout_s, timeout_s or self.timeout_s))
        self.stats["engine_wait_s"] += time.perf_counter() - t0
        if not ended and self._withdraw(turn):
            return None
        if not ended:
            self.stats["late"] += 1     # side work stuck on the host: the engine goes on beside it
            turn.late = turn.late or timeout_s is None       # past the whole timeout, not a launch's spare time
            return None
        return turn.done


def device_seconds(turn: Turn) -> float:
    try:
        return turn.seconds() or 0.0
    except RuntimeError:        # an event never recorded (its work failed): the engine thread goes on
        return 0.0
