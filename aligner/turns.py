"""The aligner's turns on the engine's device: one asked for before a batch is cut (priced at its most urgent job, so
that the jobs that come while it is waited for join the batch), then one for each further group of the forward's
slices, each taking the slices its budget holds."""
import contextlib
import itertools
import time


class Turns:
    def __init__(self, side_work, costs, stats: dict):
        """`stats`: the service's counters (turn_wait_seconds, turns_returned, turn_host_seconds)."""
        self.side_work, self.costs, self.stats = side_work, costs, stats
        self.asked = None                         # (turn, its exit) asked for before the cut, not used yet

    def ask(self, head_s: float) -> None:
        """Before the cut, for a batch whose most urgent job holds `head_s` of audio: waits for the turn."""
        asked, stack = time.monotonic(), contextlib.ExitStack()
        cost = self.costs.fixed_s + self.costs.marginal_s * head_s
        turn = stack.enter_context(self.side_work.turn(cost, begun=False))
        self.stats["turn_wait_seconds"] += time.monotonic() - asked
        self.asked = (turn, stack)

    def give_back(self) -> None:
        """An asked turn no launch used (every job abandoned, or the launch failed before its forward)."""
        if self.asked is not None:
            self.asked[1].close()
            self.stats["turns_returned"] += self.asked[0].given
            self.asked = None

    def of_batch(self, taken: list):
        """-> the `turn(weights)` a launch takes its turns with: each yields (slices to run, the turn) and appends
        (turn, their weight, their count) to `taken`."""
        @contextlib.contextmanager
        def turn(weights: list[float]):           # the aligner asks once its host work is done
            costs, asked = self.costs.of_slices(weights), time.monotonic()
            with self._asked(costs[0]) or self.side_work.turn(costs[0]) as t:
                self.stats["turn_wait_seconds"] += time.monotonic() - asked
                count = max(1, sum(total <= t.budget_s for total in itertools.accumulate(costs)))   # at least one
                taken.append((t, sum(weights[:count]), count))
                began = time.perf_counter()
                yield count, t
                self.stats["turn_host_seconds"] += time.perf_counter() - began    # its launches, on the host
        return turn

    def _asked(self, cost_s: float):
        """The turn asked for before the cut, if its budget covers the batch's first slice and the engine still waits
        for it (it stops once the batch's host work outlasts the turn's spare time); else given back unused."""
        if self.asked is None:
            return None
        turn, stack = self.asked
        if cost_s > turn.budget_s or not self.side_work.begin(turn):
            self.give_back()
            return None
        self.asked = None

        @contextlib.contextmanager
        def held():
            with stack:
                yield turn
        return held()
