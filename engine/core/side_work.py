"""Side work between the engine's steps, within the listeners' slack: the engine's public hook for work on its device.

Side work whose kernels run beside the engine's slows both: every one of a step's small, dependent kernels waits
behind the side work's blocks. So side work runs in turns, alone: after a step, when every generating stream can
spare its cost and a reserve (`offer`), and whenever the engine is idle. A turn carries a budget, the device time the
listeners can spare: side work cut in slices queues as many as fit, at least the one it asked for, and waits for the
next turn for the rest. The order is kept on the device by events: a turn's kernels follow the engine's queued step
(`after`), the next step follows the turn's kernels (`done`). Threads wait only while a turn queues its kernels,
never for the device to run them."""
import threading
import time
from contextlib import contextmanager


class Turn:
    def __init__(self, gate: "SideWork", given: bool, after=None, budget_s: float = float("inf")):
        self.gate, self.given, self.after = gate, given, after   # given: by the engine after a step (else: idle)
        # after: an event on the engine's stream (None: nothing to follow)
        self.budget_s = budget_s                # device seconds the turn may take (idle: no bound)
        self.done = self.started = None         # events on the side work's stream around its kernels
        self.ended = False

    def end(self, done=None, started=None) -> None:
        """The turn's kernels are queued (`done` follows them); the engine may go on."""
        self.gate._end(self, done, started)

    def seconds(self) -> float | None:
        """The turn's time on the device, once its work has finished (timing events given), else None."""
        if self.started is None or self.done is None:
            return None
        self.done.synchronize()
        return self.started.elapsed_time(self.done) / 1000


class SideWork:
    def __init__(self, timeout_s: float = 1.0):
        self._cv = threading.Condition()
        self.timeout_s = timeout_s      # the engine never waits longer for a turn to queue its work
        self.wanted: float | None = None   # device seconds of the turn a caller waits for
        self._given: Turn | None = None
        self._current: Turn | None = None
        self.open = False               # the engine is idle: turns need no grant
        self.stats = dict(given=0, idle=0, late=0, engine_wait_s=0.0)

    # side work's thread ------------------------------------------------------------------------------------------
    @contextmanager
    def turn(self, cost_s: float):
        """Waits for a turn of at least `cost_s` device seconds; the turn ends at the latest on exit."""
        with self._cv:
            self.wanted = cost_s
            while not self.open and self._given is None:
                self._cv.wait()
            turn, self._given, self.wanted = self._given or Turn(self, False), None, None
            self.stats["given" if turn.given else "idle"] += 1
            self._current = turn
        try:
            yield turn
        finally:
            turn.end()

    def _end(self, turn: Turn, done, started) -> None:
        with self._cv:
            if turn.ended:
                return
            turn.done, turn.started, turn.ended = done, started, True
            if self._current is turn:
                self._current = None
            self._cv.notify_all()

    # engine thread -----------------------------------------------------------------------------------------------
    def idle(self) -> None:
        """The engine has nothing to run: turns go at once."""
        with self._cv:
            self.open = True
            self._cv.notify_all()

    def close(self):
        """Before a step: no turn starts; one under way is waited for. Returns what the step must follow."""
        with self._cv:
            self.open = False
            return self._wait(self._current)

    def offer(self, slack_s: float, reserve_s: float, settle):
        """After a step: a turn to the waiting caller if the listeners' slack past `reserve_s` holds 1.5x its cost
        (the turn's budget: what they can spare). `settle()` readies the engine for it and returns the event the turn
        follows. Returns what the next step must follow."""
        cost, budget = self.wanted, (slack_s - reserve_s) / 1.5
        if cost is None or budget < cost:
            return None
        # The listeners can spare the rest for the turn's host work (queueing its kernels): no more is waited for.
        return self.give(settle(), max(0.01, budget / 2), budget)

    def give(self, after, spare_s: float | None = None, budget_s: float = float("inf")):
        """A turn of `budget_s` device seconds to the waiting caller, its kernels after `after`. Returns what the next
        step must follow; None if the turn did not queue its work within `spare_s` (then it runs beside the step)."""
        with self._cv:
            if self.wanted is None or self._given is not None:
                return None
            self._given = Turn(self, True, after, budget_s)
            self._cv.notify_all()
            return self._wait(self._given, spare_s)

    def _wait(self, turn: Turn | None, timeout_s: float | None = None):
        if turn is None:
            return None
        t0 = time.perf_counter()
        ended = self._cv.wait_for(lambda: turn.ended, min(self.timeout_s, timeout_s or self.timeout_s))
        self.stats["engine_wait_s"] += time.perf_counter() - t0
        if not ended:
            self.stats["late"] += 1     # side work stuck on the host: the engine goes on beside it
            return None
        return turn.done
